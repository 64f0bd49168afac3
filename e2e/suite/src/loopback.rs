//! Loopback addresses for the listeners of the services a test starts.
//!
//! A test tells a service where to listen (its webhook, its admin server) and then connects
//! there, so it needs the port before the service binds it. The port the kernel hands out for
//! a bind to port 0 comes from the ephemeral range, from which the kernel also hands out ports
//! to every other bind to port 0 (the sim, services told port 0) and to outgoing connections:
//! released for the service, it could be taken before the service bound it ("Address already
//! in use" in CI), and two calls could even return the same port. The ports handed out here lie
//! below that range, where the kernel never picks one, and each is handed out once per process.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

/// How many ports below the ephemeral range are used.
const SPAN: u32 = 8_000;

/// The lowest port of the kernel's ephemeral range (the first number of
/// `ip_local_port_range`), or None where it cannot be read.
fn ephemeral_floor() -> Option<u32> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// The first of the `SPAN` ports just below the ephemeral range, or None where there is no
/// room for them above the privileged ports.
fn reserved_base() -> Option<u32> {
    ephemeral_floor()
        .filter(|f| *f > SPAN + 1024)
        .map(|f| f - SPAN)
}

/// A free loopback address for a service's listener: a port no other call in this process
/// returned, outside the range the kernel hands out, and free when checked. Where there is no
/// room below the ephemeral range, a port the kernel picks (bound, then released).
pub fn free_address() -> anyhow::Result<SocketAddr> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    if let Some(base) = reserved_base() {
        // Test binaries run one at a time, but a binary's child processes and a second run
        // on the same machine may hold ports: start where this process's id points.
        let offset = std::process::id() % SPAN;
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            if n >= SPAN {
                break;
            }
            let port = base + (offset + n) % SPAN;
            let Ok(port) = u16::try_from(port) else {
                continue;
            };
            if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
                return Ok(listener.local_addr()?);
            }
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_distinct_and_bindable() {
        let addresses: Vec<SocketAddr> = (0..64).map(|_| free_address().unwrap()).collect();
        let distinct: std::collections::BTreeSet<_> = addresses.iter().collect();
        assert_eq!(distinct.len(), addresses.len(), "no port handed out twice");
        for a in &addresses {
            assert!(a.ip().is_loopback());
            TcpListener::bind(a).unwrap();
        }
    }

    #[test]
    fn addresses_avoid_the_ephemeral_range() {
        let Some(base) = reserved_base() else {
            return;
        };
        let a = free_address().unwrap();
        let port = u32::from(a.port());
        assert!(
            (base..base + SPAN).contains(&port),
            "{a} should lie in {base}..{}, below the ephemeral range",
            base + SPAN
        );
    }
}
