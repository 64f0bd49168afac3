//! The text log format keeps each event on one line. tracing-subscriber escapes ESC and the C1
//! controls in what it formats, but not CR or a newline. A value a tenant wrote (a CronHPA job
//! name, a metric name inside an error) could then start a line of its own and forge an entry.
//! The JSON format escapes them already.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// Makes [`OneLine`] writers on stderr.
#[derive(Clone, Copy, Debug, Default)]
pub struct OneLineStderr;

impl<'a> MakeWriter<'a> for OneLineStderr {
    type Writer = OneLine<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        OneLine(io::stderr())
    }
}

/// Writes each buffer (the fmt layer writes one formatted event per call) with its inner CRs and
/// newlines as `\r` and `\n`; only a final newline ends the line.
#[derive(Debug)]
pub struct OneLine<W>(pub W);

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        if !body.iter().any(|b| matches!(b, b'\n' | b'\r')) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut line = Vec::with_capacity(buf.len() + 8);
        for &b in body {
            match b {
                b'\n' => line.extend_from_slice(b"\\n"),
                b'\r' => line.extend_from_slice(b"\\r"),
                other => line.push(other),
            }
        }
        line.extend_from_slice(end);
        self.0.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(events: &[&str]) -> String {
        let mut out = OneLine(Vec::new());
        for e in events {
            out.write_all(e.as_bytes()).unwrap();
        }
        String::from_utf8(out.0).unwrap()
    }

    #[test]
    fn an_event_stays_one_line() {
        assert_eq!(
            written(&["INFO job submitted job=a\nERROR forged\n", "INFO next\n"]),
            "INFO job submitted job=a\\nERROR forged\nINFO next\n"
        );
        assert_eq!(written(&["a\r\nb"]), "a\\r\\nb");
        assert_eq!(written(&["plain\n"]), "plain\n");
    }

    /// Through the fmt layer: a field holding a newline does not start a line.
    #[test]
    fn a_field_with_a_newline_is_logged_on_one_line() {
        let sink = crate::log_sink::Sink::default();
        let make = {
            let sink = sink.clone();
            move || OneLine(sink.clone())
        };
        let subscriber = tracing_subscriber::fmt()
            .compact()
            .with_ansi(false)
            .with_writer(make)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let job = "a\nERROR cron_hpa: forged";
            tracing::info!(job = %job, "job submitted");
        });
        let text = sink.text();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("job=a\\nERROR cron_hpa: forged"), "{text}");
    }
}
