//! A log writer that keeps what a `tracing_subscriber::fmt` layer writes, to be read back: how
//! the services' tests check what reaches the operator's log, and what does not.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};

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
/// A log statement first reached on a thread without a subscriber (another test running beside
/// this one) is remembered as of no interest to anyone, and this thread's subscriber would never
/// see it: the cache is rebuilt once the subscriber is in place. A statement reached for the
/// first time on another thread *while* the subscriber is being set up can still be missed; a
/// test whose statements other tests also reach runs them once before calling this.
pub fn warnings(f: impl FnOnce()) -> Vec<String> {
    let sink = Sink::default();
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
    sink.text().lines().map(str::to_owned).collect()
}
