//! A log writer that keeps what a `tracing_subscriber::fmt` layer writes, to be read back: how
//! the services' tests check what reaches the operator's log, and what does not.

use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A writer that keeps everything written to it; clones share it.
#[derive(Clone, Default)]
pub struct Sink(Arc<Mutex<Vec<u8>>>);

impl Sink {
    /// Everything written so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The lines `f` logs at warn or above, as the services' default format writes them.
///
/// The first call installs a process-wide subscriber (at warn) that writes each event to the
/// capture of the thread it happens on, if any, and drops it otherwise. A subscriber set only
/// for this thread (`with_default`) was not enough: tracing caches per log statement whether
/// anyone wants it, and with that subscriber the only one alive it answers for a statement first
/// reached on *another* thread with that thread's default, nobody, so a test running beside
/// this one could make a statement silent for it (0 lines captured, twice in CI). With a
/// process-wide subscriber every thread's answer is yes. Where another process-wide subscriber
/// was set first, the capture falls back to this thread's own, with that risk.
pub fn warnings(f: impl FnOnce()) -> Vec<String> {
    static GLOBAL: OnceLock<bool> = OnceLock::new();
    let global = *GLOBAL.get_or_init(|| {
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .with_writer(|| ThisThread)
            .try_init()
            .is_ok()
    });
    let sink = Sink::default();
    if global {
        CAPTURE.with(|c| *c.borrow_mut() = Some(sink.clone()));
        f();
        CAPTURE.with(|c| *c.borrow_mut() = None);
    } else {
        let make = {
            let sink = sink.clone();
            move || sink.clone()
        };
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .with_writer(make)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::callsite::rebuild_interest_cache();
            f();
        });
    }
    sink.text().lines().map(str::to_owned).collect()
}

thread_local! {
    /// Where this thread's events go while [`warnings`] captures them.
    static CAPTURE: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// The process-wide subscriber's writer: the capture of the thread writing, if any.
struct ThisThread;

impl Write for ThisThread {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        CAPTURE.with(|c| {
            if let Some(sink) = c.borrow_mut().as_mut() {
                sink.write(buf)
            } else {
                Ok(buf.len())
            }
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
