//! What the benchmarks measure about a process: CPU seconds, resident memory and the machine,
//! read from Linux `/proc` (`self` or a child's pid).
//!
//! The benchmarks run the service under test in a child process where they can, so these
//! numbers are the service's own and not the in-process sim's.

use anyhow::Context as _;

/// Which process to read: this one or a child by pid.
#[derive(Debug, Clone, Copy)]
pub enum Proc {
    /// `/proc/self`.
    This,
    /// `/proc/<pid>`.
    Pid(u32),
}

impl Proc {
    fn file(self, name: &str) -> anyhow::Result<String> {
        let path = match self {
            Proc::This => format!("/proc/self/{name}"),
            Proc::Pid(pid) => format!("/proc/{pid}/{name}"),
        };
        std::fs::read_to_string(&path).with_context(|| format!("read {path}"))
    }

    /// User + system CPU seconds so far (clock ticks at Linux's fixed USER_HZ of 100).
    pub fn cpu_seconds(self) -> anyhow::Result<f64> {
        stat_cpu_seconds(&self.file("stat")?)
    }

    /// A `/proc/<pid>/status` memory line in MiB: `VmRSS` (resident now) or `VmHWM` (peak).
    pub fn memory_mib(self, key: &str) -> anyhow::Result<f64> {
        let status = self.file("status")?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next())
            .with_context(|| format!("no {key} in status"))?
            .parse()?;
        Ok(kib / 1024.0)
    }

    /// Resident memory now, MiB.
    pub fn rss_mib(self) -> anyhow::Result<f64> {
        self.memory_mib("VmRSS")
    }

    /// Peak resident memory, MiB.
    pub fn peak_rss_mib(self) -> anyhow::Result<f64> {
        self.memory_mib("VmHWM")
    }
}

/// CPU seconds of this process's threads whose name starts with `prefix` (for a service run
/// on a runtime of its own inside the benchmark process).
pub fn thread_cpu_seconds(prefix: &str) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for task in std::fs::read_dir("/proc/self/task")?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim().starts_with(prefix) {
            total += stat_cpu_seconds(&std::fs::read_to_string(task.path().join("stat"))?)?;
        }
    }
    Ok(total)
}

/// utime + stime of a `stat` line. The command name is parenthesised and may hold spaces, so
/// fields are counted after its closing parenthesis: there utime and stime are the 12th and
/// 13th.
fn stat_cpu_seconds(stat: &str) -> anyhow::Result<f64> {
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields.get(i).context("short stat")?.parse::<f64>()?)
    };
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// The CPU model and core count, for the report.
pub fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!("{cores} cores, {model}")
}

/// The 1-minute load average (how busy the machine was while measuring).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A service under measurement: this benchmark binary started again as `serve ARGS…`, so its
/// CPU and memory are its own. Its stdin is the leash: when the benchmark closes it (or exits),
/// the child's [`parent_gone`] token fires and the service shuts down.
pub struct Child {
    child: std::process::Child,
    /// The child's process, for CPU and memory readings.
    pub proc: Proc,
}

impl Child {
    /// Starts `serve ARGS…`. With `reports`, the child's stdout is piped for
    /// [`Child::first_line`]; otherwise it is inherited (a pipe nobody reads would fill up).
    pub fn serve(args: &[&std::ffi::OsStr], reports: bool) -> anyhow::Result<Child> {
        Self::start(args, reports, std::process::Stdio::inherit())
    }

    /// [`Child::serve`] with the child's stderr (its log lines) written to `log`, for a
    /// benchmark that reads the service's own account of its loops afterwards.
    pub fn serve_logging_to(
        args: &[&std::ffi::OsStr],
        reports: bool,
        log: std::fs::File,
    ) -> anyhow::Result<Child> {
        Self::start(args, reports, log.into())
    }

    /// [`Child::serve`] run under `wrapper` (a profiler and its flags, such as `heaptrack -o
    /// FILE`), which must run its last arguments as the program. The readings of [`Child::proc`]
    /// are then the wrapper's, not the service's.
    pub fn serve_wrapped(
        wrapper: &[&std::ffi::OsStr],
        args: &[&std::ffi::OsStr],
        reports: bool,
    ) -> anyhow::Result<Child> {
        let Some((program, flags)) = wrapper.split_first() else {
            return Self::serve(args, reports);
        };
        let mut command = std::process::Command::new(program);
        command.args(flags).arg(std::env::current_exe()?);
        Self::spawn(command, args, reports, std::process::Stdio::inherit())
    }

    fn start(
        args: &[&std::ffi::OsStr],
        reports: bool,
        stderr: std::process::Stdio,
    ) -> anyhow::Result<Child> {
        let command = std::process::Command::new(std::env::current_exe()?);
        Self::spawn(command, args, reports, stderr)
    }

    fn spawn(
        mut command: std::process::Command,
        args: &[&std::ffi::OsStr],
        reports: bool,
        stderr: std::process::Stdio,
    ) -> anyhow::Result<Child> {
        let child = command
            .arg("serve")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(if reports {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::inherit()
            })
            .stderr(stderr)
            .spawn()
            .context("start the service's process")?;
        let proc = Proc::Pid(child.id());
        Ok(Child { child, proc })
    }

    /// The first line the child printed (its address or port). Blocks until it comes.
    pub fn first_line(&mut self) -> anyhow::Result<String> {
        use std::io::BufRead as _;
        let stdout = self
            .child
            .stdout
            .take()
            .context("the child's stdout is not piped")?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        Ok(line.trim().to_owned())
    }

    /// Kills the child with SIGKILL (a crash: nothing is flushed or released) and waits until
    /// it is gone.
    pub fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().context("SIGKILL the service's process")?;
        self.child.wait().context("reap the killed process")?;
        Ok(())
    }

    /// Closes the leash and waits for the child to exit.
    pub fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// In the child: a token cancelled when the parent closes our stdin or exits.
pub fn parent_gone() -> tokio_util::sync::CancellationToken {
    let token = tokio_util::sync::CancellationToken::new();
    let cancel = token.clone();
    std::thread::spawn(move || {
        use std::io::Read as _;
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        cancel.cancel();
    });
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_counted_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (tokio (rt) 1) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0";
        assert!((stat_cpu_seconds(stat).unwrap() - 3.0).abs() < 1e-9);
        assert!(stat_cpu_seconds("42 (x) S 1").is_err());
    }

    #[test]
    fn this_process_has_memory_and_has_used_cpu() {
        let rss = Proc::This.rss_mib().unwrap();
        assert!(rss > 0.0);
        assert!(Proc::This.peak_rss_mib().unwrap() >= rss);
        assert!(Proc::This.cpu_seconds().unwrap() >= 0.0);
        assert!(Proc::This.memory_mib("NoSuchLine").is_err());
    }
}
