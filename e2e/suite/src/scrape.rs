//! Reading a service's Prometheus endpoint from a test or a benchmark: one scrape, a counter,
//! and quantiles of what a histogram observed between two scrapes (interpolated within
//! buckets, as Prometheus's `histogram_quantile` does).

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The text of `GET /metrics` on `addr`.
pub async fn metrics(addr: std::net::SocketAddr) -> anyhow::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

/// The value of the unlabelled sample `name` (0 when absent).
pub fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The whole-number value of the sample `sample` (a name with its labels, as printed), 0 when
/// absent; an error when it is not a whole number.
pub fn count(text: &str, sample: &str) -> anyhow::Result<u64> {
    for line in text.lines() {
        if let Some(value) = line.strip_prefix(sample).and_then(|r| r.strip_prefix(' ')) {
            let value = value.trim();
            // Counters and gauges counted here hold whole numbers, possibly written as `2.0`.
            let whole = value.strip_suffix(".0").unwrap_or(value);
            return Ok(whole.parse()?);
        }
    }
    Ok(0)
}

/// The cumulative buckets `(upper bound, count)` of the unlabelled histogram `name`.
pub fn buckets(text: &str, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    text.lines()
        .filter_map(|line| {
            let (le, count) = line.strip_prefix(&prefix)?.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count.trim().parse().ok()?))
        })
        .collect()
}

/// The `q` quantile of the observations made between the scrapes `before` and `after` (NaN
/// when there were none).
pub fn quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> f64 {
    let deltas: Vec<(f64, f64)> = after
        .iter()
        .map(|(le, c)| {
            let b = before
                .iter()
                .find(|(l, _)| l.total_cmp(le).is_eq())
                .map_or(0.0, |(_, c)| *c);
            (*le, c - b)
        })
        .collect();
    let total = deltas.last().map_or(0.0, |(_, c)| *c);
    if total <= 0.0 {
        return f64::NAN;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for (le, c) in &deltas {
        if *c >= rank {
            if le.is_infinite() {
                return prev.0;
            }
            let span = c - prev.1;
            let frac = if span > 0.0 {
                (rank - prev.1) / span
            } else {
                1.0
            };
            return prev.0 + (le - prev.0) * frac;
        }
        prev = (*le, *c);
    }
    prev.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE x histogram\n\
        x_bucket{le=\"0.001\"} 10\n\
        x_bucket{le=\"0.002\"} 30\n\
        x_bucket{le=\"0.004\"} 40\n\
        x_bucket{le=\"+Inf\"} 40\n\
        x_count 40\n\
        runs_total 17\n";

    #[test]
    fn quantiles_interpolate_inside_the_bucket_of_the_difference() {
        let after = buckets(TEXT, "x");
        assert_eq!(after.len(), 4);
        let before = [
            (0.001, 10.0),
            (0.002, 10.0),
            (0.004, 10.0),
            (f64::INFINITY, 10.0),
        ];
        // 30 new observations: 20 in (1, 2] ms, 10 in (2, 4] ms.
        assert!((quantile(&before, &after, 0.5) - 0.00175).abs() < 1e-9);
        assert!((quantile(&before, &after, 1.0) - 0.004).abs() < 1e-9);
        assert!(quantile(&after, &after, 0.5).is_nan());
        assert!((value(TEXT, "runs_total") - 17.0).abs() < 1e-9);
        assert!(value(TEXT, "x").abs() < 1e-9);
        assert_eq!(count(TEXT, "runs_total").unwrap(), 17);
        assert_eq!(count("a{b=\"c\"} 2.0\n", "a{b=\"c\"}").unwrap(), 2);
        assert_eq!(count(TEXT, "absent_total").unwrap(), 0);
        assert!(count("a 1.5\n", "a").is_err());
    }
}
