//! One Prometheus server's circuit breaker and its cap on queries in flight: pure, no I/O, the
//! clock is a parameter.
//!
//! A caller that has many objects querying a few servers keeps one [`ServerGate`] per server,
//! asks [`ServerGate::admit`] before sending a query, and reports how it ended with
//! [`ServerGate::finish`] (exactly once per admitted query, also when the query was abandoned).
//! The gate decides nothing about a query's content; it exists so that a server that does not
//! answer costs its callers nothing once that is known, and so that, before it is known, it
//! cannot keep more of them waiting than its limit (plus, for a moment, those waiting for a
//! slot while nothing was known against it).
//!
//! Rules:
//! - Only *unresponsiveness* counts against a server ([`Outcome::of`]): a timeout, a refused
//!   connection, a connection that failed. Any HTTP answer (a rejected query, a 5xx, a 401, an
//!   answer too large) shows the server is there; a failed TLS handshake, a bad configuration,
//!   a query abandoned at shutdown and the gate's own refusals count neither way.
//! - The breaker opens when [`BreakerPolicy::threshold`] queries in a row (across all callers)
//!   were unresponsive and the server has not answered anything for [`BreakerPolicy::quiet`]
//!   (or never has). The second condition keeps one caller's slow queries on a server others
//!   read successfully (a shared Prometheus, a PromQL query that times out) from opening it for
//!   everyone: their answers keep it closed.
//! - While open, every query is refused at once with the time the cooldown ends, rounded up to
//!   a whole second (so the message stays the same for the whole cooldown). When it ends, one
//!   query is let through to probe the server (half-open), the others are still refused; the
//!   probe answering closes the breaker and resets the cooldown, the probe failing opens it
//!   again for twice the last cooldown, at most [`BreakerPolicy::max_cooldown`]. A probe that
//!   ended without a verdict (abandoned) lets the next query probe.
//! - The cap: with a limit, at most that many admitted queries are in flight; one more is
//!   refused ([`Refusal::Busy`]). The refusal says whether a slot is worth waiting for a moment:
//!   only while the breaker is closed and the server's last query was answered (or it has had
//!   none yet), so that a burst of queries to a server that answers is smoothed rather than
//!   failed. Once a query timed out, a caller waiting for a slot would be held as long as the
//!   query it waits for: the refusal is final.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::error::{PrometheusError, Unreachable};

/// When a server's breaker opens and how long it stays open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Unresponsive queries in a row that open the breaker. Default 3.
    pub threshold: u32,
    /// How long the server must not have answered anything before it opens. Default 30 s.
    pub quiet: Duration,
    /// The first cooldown. Default 30 s.
    pub cooldown: Duration,
    /// The longest cooldown (each failed probe doubles it up to this). Default 5 min.
    pub max_cooldown: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            threshold: 3,
            quiet: Duration::from_secs(30),
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(300),
        }
    }
}

/// What a query's end says about its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered (anything at all over HTTP).
    Answered,
    /// No answer: a timeout, a refused or failed connection.
    Unresponsive,
    /// Nothing learned (abandoned, not sent, TLS or configuration failure).
    Neither,
}

impl Outcome {
    /// The outcome of a query that ended with `result`.
    pub fn of<T>(result: &Result<T, PrometheusError>) -> Self {
        let Err(e) = result else {
            return Outcome::Answered;
        };
        match e {
            PrometheusError::Unreachable { cause, .. } => match cause {
                Unreachable::TimedOut | Unreachable::Refused | Unreachable::Connection => {
                    Outcome::Unresponsive
                }
                Unreachable::ServerError | Unreachable::Throttled => Outcome::Answered,
                Unreachable::Tls => Outcome::Neither,
            },
            PrometheusError::Unauthorized { unreadable, .. } => {
                // Credentials that could not be read were never sent.
                if *unreadable {
                    Outcome::Neither
                } else {
                    Outcome::Answered
                }
            }
            PrometheusError::TooLarge { .. }
            | PrometheusError::Query { .. }
            | PrometheusError::EmptyResult { .. } => Outcome::Answered,
            PrometheusError::Config(_)
            | PrometheusError::NotAllowed { .. }
            | PrometheusError::Canceled { .. }
            | PrometheusError::Unresponsive { .. }
            | PrometheusError::Busy { .. } => Outcome::Neither,
        }
    }
}

/// Why a query was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The breaker is open (or probing): no query before `until`.
    Unresponsive {
        /// When the cooldown ends (whole seconds).
        until: Timestamp,
    },
    /// `limit` queries are in flight already.
    Busy {
        /// The cap.
        limit: usize,
        /// The server answered its last query (or has had none): a slot is likely to free
        /// soon, and a caller may wait a moment for one. Otherwise it should not wait.
        wait: bool,
    },
}

/// An admitted query: send it, then report how it ended with [`ServerGate::finish`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "an admitted query must be finished"]
pub struct Admitted {
    /// This query probes a server whose cooldown ended.
    pub probe: bool,
}

/// A change of the breaker worth a log line and a gauge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// It opened (or opened again after a failed probe) until then.
    Opened {
        /// When the cooldown ends.
        until: Timestamp,
    },
    /// The server answered: it closed.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Closed,
    /// Refusing until `until`; from then on the next query probes.
    Open {
        until: Timestamp,
    },
    /// One probe in flight after the cooldown that ended at `until`.
    Probing {
        until: Timestamp,
    },
}

/// One server's breaker and its queries in flight.
#[derive(Clone, Debug)]
pub struct ServerGate {
    policy: BreakerPolicy,
    /// The most queries in flight; `None`: no cap.
    limit: Option<usize>,
    state: State,
    /// Unresponsive outcomes since the last answer.
    failures: u32,
    last_answer: Option<Timestamp>,
    /// The cooldown of the next opening.
    cooldown: Duration,
    in_flight: usize,
}

impl ServerGate {
    /// A closed breaker with `policy`, admitting at most `limit` queries at a time (`None`:
    /// any number).
    pub fn new(policy: BreakerPolicy, limit: Option<usize>) -> Self {
        Self {
            policy,
            limit,
            state: State::Closed,
            failures: 0,
            last_answer: None,
            cooldown: policy.cooldown,
            in_flight: 0,
        }
    }

    /// Whether a query may be sent now; if so it counts as in flight until
    /// [`ServerGate::finish`].
    pub fn admit(&mut self, now: Timestamp) -> Result<Admitted, Refusal> {
        let probe = match self.state {
            State::Closed => false,
            State::Open { until } if now >= until => true,
            State::Open { until } | State::Probing { until } => {
                return Err(Refusal::Unresponsive { until });
            }
        };
        if let Some(limit) = self.limit
            && self.in_flight >= limit
        {
            // Checked before a probe starts, so that a refused one leaves the probe to the
            // next caller.
            return Err(Refusal::Busy {
                limit,
                wait: self.state == State::Closed && self.failures == 0,
            });
        }
        if let State::Open { until } = self.state {
            self.state = State::Probing { until };
        }
        self.in_flight += 1;
        Ok(Admitted { probe })
    }

    /// Records how an admitted query ended; says when the breaker opened or closed.
    pub fn finish(
        &mut self,
        admitted: Admitted,
        outcome: Outcome,
        now: Timestamp,
    ) -> Option<Transition> {
        self.in_flight = self.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Answered => {
                self.failures = 0;
                self.last_answer = Some(now);
                self.cooldown = self.policy.cooldown;
                // Any answer closes it, a straggler's from before the opening too: the server
                // is there.
                (self.state != State::Closed).then(|| {
                    self.state = State::Closed;
                    Transition::Closed
                })
            }
            Outcome::Unresponsive => {
                self.failures = self.failures.saturating_add(1);
                let open = if admitted.probe {
                    true
                } else {
                    self.state == State::Closed
                        && self.failures >= self.policy.threshold
                        && self.last_answer.is_none_or(|at| {
                            now.duration_since(at)
                                >= SignedDuration::try_from(self.policy.quiet)
                                    .unwrap_or(SignedDuration::MAX)
                        })
                };
                open.then(|| self.open(now))
            }
            Outcome::Neither => {
                if admitted.probe
                    && let State::Probing { until } = self.state
                {
                    // No verdict: the next query probes instead.
                    self.state = State::Open { until };
                }
                None
            }
        }
    }

    fn open(&mut self, now: Timestamp) -> Transition {
        let until = whole_second_after(now, self.cooldown);
        self.state = State::Open { until };
        self.cooldown = self
            .cooldown
            .saturating_mul(2)
            .min(self.policy.max_cooldown);
        Transition::Opened { until }
    }

    /// Whether queries are refused (open, or probing).
    pub fn is_open(&self) -> bool {
        self.state != State::Closed
    }

    /// Admitted queries not finished yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

/// `now + d`, rounded up to a whole second.
fn whole_second_after(now: Timestamp, d: Duration) -> Timestamp {
    let at = SignedDuration::try_from(d)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX);
    let up = i64::from(at.subsec_nanosecond() > 0);
    Timestamp::from_second(at.as_second().saturating_add(up)).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn t(seconds: f64) -> Timestamp {
        Timestamp::from_millisecond((seconds * 1000.0).round() as i64).unwrap()
    }

    fn gate(limit: Option<usize>) -> ServerGate {
        ServerGate::new(BreakerPolicy::default(), limit)
    }

    /// Admits and finishes one query at `at` with `outcome`.
    fn query(g: &mut ServerGate, at: f64, outcome: Outcome) -> Option<Transition> {
        let admitted = g.admit(t(at)).expect("admitted");
        g.finish(admitted, outcome, t(at))
    }

    #[test]
    fn three_unresponsive_queries_in_a_row_open_it() {
        let mut g = gate(None);
        assert_eq!(query(&mut g, 0.0, Outcome::Unresponsive), None);
        assert_eq!(query(&mut g, 1.0, Outcome::Unresponsive), None);
        assert!(!g.is_open());
        assert_eq!(
            query(&mut g, 2.5, Outcome::Unresponsive),
            Some(Transition::Opened { until: t(33.0) }),
            "30 s from 2.5 s, up to the whole second"
        );
        assert!(g.is_open());
        assert_eq!(
            g.admit(t(10.0)),
            Err(Refusal::Unresponsive { until: t(33.0) })
        );
        assert_eq!(g.in_flight(), 0);
    }

    #[test]
    fn an_answer_resets_the_count_and_other_failures_do_not_count() {
        let mut g = gate(None);
        query(&mut g, 0.0, Outcome::Unresponsive);
        query(&mut g, 0.0, Outcome::Unresponsive);
        query(&mut g, 0.0, Outcome::Neither);
        query(&mut g, 0.0, Outcome::Answered);
        query(&mut g, 40.0, Outcome::Unresponsive);
        query(&mut g, 41.0, Outcome::Unresponsive);
        assert!(!g.is_open());
        assert!(query(&mut g, 42.0, Outcome::Unresponsive).is_some());
    }

    #[test]
    fn it_stays_closed_while_the_server_answered_recently() {
        // A shared server others read successfully: one caller's timeouts in a burst do not
        // open it for everyone.
        let mut g = gate(None);
        query(&mut g, 0.0, Outcome::Answered);
        for i in 0..10 {
            assert_eq!(
                query(&mut g, 1.0 + f64::from(i), Outcome::Unresponsive),
                None
            );
        }
        assert!(!g.is_open());
        // Nothing answered for the quiet period: the next one opens it.
        assert!(matches!(
            query(&mut g, 30.0, Outcome::Unresponsive),
            Some(Transition::Opened { .. })
        ));
    }

    #[test]
    fn after_the_cooldown_one_probe_goes_and_an_answer_closes_it() {
        let mut g = gate(None);
        for _ in 0..3 {
            query(&mut g, 0.0, Outcome::Unresponsive);
        }
        assert!(g.admit(t(29.9)).is_err());
        let probe = g.admit(t(30.0)).expect("the probe");
        assert!(probe.probe);
        // Everyone else is still refused while it is out.
        assert_eq!(
            g.admit(t(31.0)),
            Err(Refusal::Unresponsive { until: t(30.0) })
        );
        assert_eq!(
            g.finish(probe, Outcome::Answered, t(32.0)),
            Some(Transition::Closed)
        );
        assert!(!g.is_open());
        assert_eq!(g.admit(t(32.0)), Ok(Admitted { probe: false }));
    }

    #[test]
    fn failed_probes_double_the_cooldown_up_to_the_cap() {
        let mut g = gate(None);
        for _ in 0..3 {
            query(&mut g, 0.0, Outcome::Unresponsive);
        }
        let mut until = 30.0;
        for expected in [60.0, 120.0, 240.0, 300.0, 300.0] {
            let now = until;
            let probe = g.admit(t(now)).expect("a probe at the end of the cooldown");
            assert!(probe.probe);
            assert_eq!(
                g.finish(probe, Outcome::Unresponsive, t(now)),
                Some(Transition::Opened {
                    until: t(now + expected)
                }),
                "after the probe at {now}"
            );
            until = now + expected;
        }
        // An answer resets the cooldown to its start.
        let probe = g.admit(t(until)).unwrap();
        assert_eq!(
            g.finish(probe, Outcome::Answered, t(until)),
            Some(Transition::Closed)
        );
        for _ in 0..3 {
            query(&mut g, until + 60.0, Outcome::Unresponsive);
        }
        assert_eq!(
            g.admit(t(until + 60.0)),
            Err(Refusal::Unresponsive {
                until: t(until + 90.0)
            })
        );
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_query_probe() {
        let mut g = gate(None);
        for _ in 0..3 {
            query(&mut g, 0.0, Outcome::Unresponsive);
        }
        let probe = g.admit(t(30.0)).unwrap();
        assert_eq!(g.finish(probe, Outcome::Neither, t(30.5)), None);
        assert!(g.is_open());
        let next = g.admit(t(31.0)).expect("another probe");
        assert!(next.probe);
    }

    #[test]
    fn stragglers_from_before_the_opening_do_not_reopen_it_but_an_answer_closes_it() {
        let mut g = gate(None);
        let late: Vec<Admitted> = (0..5).map(|_| g.admit(t(0.0)).unwrap()).collect();
        for a in &late[..3] {
            g.finish(*a, Outcome::Unresponsive, t(5.0));
        }
        assert_eq!(
            g.admit(t(6.0)),
            Err(Refusal::Unresponsive { until: t(35.0) })
        );
        // One more timeout: still until 35, not pushed on.
        assert_eq!(g.finish(late[3], Outcome::Unresponsive, t(7.0)), None);
        assert_eq!(
            g.admit(t(8.0)),
            Err(Refusal::Unresponsive { until: t(35.0) })
        );
        // The last one answers: the server is there after all.
        assert_eq!(
            g.finish(late[4], Outcome::Answered, t(9.0)),
            Some(Transition::Closed)
        );
        assert!(g.admit(t(9.0)).is_ok());
    }

    fn busy(wait: bool) -> Result<Admitted, Refusal> {
        Err(Refusal::Busy { limit: 2, wait })
    }

    #[test]
    fn the_cap_refuses_one_more_and_says_whether_a_slot_is_worth_waiting_for() {
        let mut gate = gate(Some(2));
        let first = gate.admit(t(0.0)).unwrap();
        let second = gate.admit(t(0.0)).unwrap();
        // Nothing known against the server yet: worth waiting for a slot.
        assert_eq!(gate.admit(t(0.0)), busy(true));
        assert_eq!(gate.in_flight(), 2);
        gate.finish(first, Outcome::Answered, t(1.0));
        let third = gate.admit(t(1.0)).expect("a slot again");
        assert_eq!(gate.admit(t(1.0)), busy(true));
        // A timeout: the queries in flight may well hang too, so nobody waits for them.
        gate.finish(second, Outcome::Unresponsive, t(1.0));
        let fourth = gate.admit(t(1.0)).unwrap();
        assert_eq!(gate.admit(t(1.0)), busy(false));
        // An answer makes a slot worth waiting for again.
        gate.finish(third, Outcome::Answered, t(2.0));
        let fifth = gate.admit(t(2.0)).unwrap();
        assert_eq!(gate.admit(t(2.0)), busy(true));
        gate.finish(fourth, Outcome::Answered, t(2.0));
        gate.finish(fifth, Outcome::Answered, t(2.0));
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn without_a_limit_any_number_is_admitted() {
        let mut gate = gate(None);
        for _ in 0..1000 {
            let _ = gate.admit(t(0.0)).unwrap();
        }
        assert_eq!(gate.in_flight(), 1000);
    }

    #[test]
    fn the_cooldown_end_is_a_whole_second_and_saturates() {
        assert_eq!(whole_second_after(t(1.0), 30 * SECOND), t(31.0));
        assert_eq!(whole_second_after(t(1.001), 30 * SECOND), t(32.0));
        let far = whole_second_after(Timestamp::MAX, 30 * SECOND);
        assert!(far >= t(1.0));
    }

    #[test]
    fn only_unresponsiveness_counts_against_a_server() {
        let server = || "s".to_owned();
        let query = || "q".to_owned();
        let unreachable = |cause| PrometheusError::Unreachable {
            server: server(),
            query: query(),
            cause,
            attempts: 1,
            detail: String::new(),
        };
        let of = |e: PrometheusError| Outcome::of::<()>(&Err(e));
        assert_eq!(
            Outcome::of(&Ok::<_, PrometheusError>(1.0)),
            Outcome::Answered
        );
        for cause in [
            Unreachable::TimedOut,
            Unreachable::Refused,
            Unreachable::Connection,
        ] {
            assert_eq!(of(unreachable(cause)), Outcome::Unresponsive, "{cause}");
        }
        for cause in [Unreachable::ServerError, Unreachable::Throttled] {
            assert_eq!(of(unreachable(cause)), Outcome::Answered, "{cause}");
        }
        assert_eq!(of(unreachable(Unreachable::Tls)), Outcome::Neither);
        assert_eq!(
            of(PrometheusError::TooLarge {
                server: server(),
                query: query(),
                limit: 1
            }),
            Outcome::Answered
        );
        assert_eq!(
            of(PrometheusError::Query {
                server: server(),
                query: query(),
                rejection: super::super::error::Rejection::Rejected("bad_data"),
                detail: String::new(),
            }),
            Outcome::Answered
        );
        assert_eq!(
            of(PrometheusError::Canceled { server: server() }),
            Outcome::Neither
        );
        assert_eq!(
            of(PrometheusError::Busy {
                server: server(),
                limit: 8,
            }),
            Outcome::Neither
        );
    }
}
