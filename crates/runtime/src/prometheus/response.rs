//! The Prometheus HTTP API's answer: `{"status": "success", "data": {"resultType": …, "result":
//! …}}` or `{"status": "error", "errorType": …, "error": …}`.
//!
//! Sample values are strings (`"0.25"`, `"1e+06"`, `"NaN"`, `"+Inf"`, `"-Inf"`) and times are
//! float Unix seconds; both are kept as `f64`, so a NaN stays visible to the caller, which decides
//! what it means (one-number queries report it as an empty result).

use std::collections::BTreeMap;

use serde::Deserialize;

/// One sample: Unix seconds (with millisecond precision) and the value as sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Unix seconds.
    pub time: f64,
    /// The value; may be NaN or ±Inf.
    pub value: f64,
}

/// A labelled series: one sample for an instant vector, many for a range matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The series' labels (`__name__` included when the server sends it).
    pub labels: BTreeMap<String, String>,
    /// Samples, oldest first.
    pub samples: Vec<Sample>,
}

/// The `data` of a successful answer, by `resultType`.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryData {
    /// `vector`: each series has exactly one sample.
    Vector(Vec<Series>),
    /// `matrix`: each series has its samples over the range.
    Matrix(Vec<Series>),
    /// `scalar`: one number.
    Scalar(Sample),
    /// `string`: a time and a string (rare; PromQL string literals).
    String(f64, String),
}

impl QueryData {
    /// The series of a vector or matrix; empty for a scalar or a string.
    pub fn into_series(self) -> Vec<Series> {
        match self {
            QueryData::Vector(s) | QueryData::Matrix(s) => s,
            QueryData::Scalar(_) | QueryData::String(..) => Vec::new(),
        }
    }
}

/// Why a body is not a successful answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// `status: error`, with Prometheus' `errorType` and `error`.
    Rejected {
        /// `bad_data`, `execution`, `timeout`, `canceled`, `internal`, `unavailable`, …
        error_type: String,
        /// The server's message.
        error: String,
    },
    /// Not the Prometheus HTTP API (not JSON, unknown `resultType`, a value that is no number).
    Malformed(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<RawData>,
    #[serde(default)]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawData {
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct RawSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    value: Option<(f64, String)>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// Reads a Prometheus HTTP API body (whatever the HTTP status: Prometheus sends its error
/// envelope with 400, 422 and 503 too).
pub fn parse_body(body: &[u8]) -> Result<QueryData, BodyError> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|e| {
        BodyError::Malformed(format!(
            "not a Prometheus API answer: {e}: {}",
            excerpt(body)
        ))
    })?;
    if envelope.status != "success" {
        return Err(BodyError::Rejected {
            error_type: envelope
                .error_type
                .unwrap_or_else(|| envelope.status.clone()),
            error: envelope.error.unwrap_or_default(),
        });
    }
    let RawData {
        result_type,
        result,
    } = envelope
        .data
        .ok_or_else(|| BodyError::Malformed("`data` is missing".into()))?;
    let malformed =
        |e: serde_json::Error| BodyError::Malformed(format!("bad {result_type} result: {e}"));
    // `result` is moved into its type, not copied: the answer is held once at a time.
    match result_type.as_str() {
        "vector" | "matrix" => {
            let raw: Vec<RawSeries> = serde_json::from_value(result).map_err(malformed)?;
            let series = raw
                .into_iter()
                .map(|s| {
                    let samples = s
                        .value
                        .into_iter()
                        .chain(s.values)
                        .map(|(time, v)| sample(time, &v))
                        .collect::<Result<_, _>>()?;
                    Ok(Series {
                        labels: s.metric,
                        samples,
                    })
                })
                .collect::<Result<Vec<_>, BodyError>>()?;
            Ok(if result_type == "vector" {
                QueryData::Vector(series)
            } else {
                QueryData::Matrix(series)
            })
        }
        "scalar" => {
            let (time, v): (f64, String) = serde_json::from_value(result).map_err(malformed)?;
            Ok(QueryData::Scalar(sample(time, &v)?))
        }
        "string" => {
            let (time, v): (f64, String) = serde_json::from_value(result).map_err(malformed)?;
            Ok(QueryData::String(time, v))
        }
        other => Err(BodyError::Malformed(format!(
            "unknown resultType {other:?}"
        ))),
    }
}

/// A sample from the API's `[time, "value"]`. Rust's float syntax reads Prometheus' `NaN`,
/// `+Inf` and `-Inf` (case-insensitively) as well as Go's exponent form.
fn sample(time: f64, value: &str) -> Result<Sample, BodyError> {
    let value = value
        .parse::<f64>()
        .map_err(|_| BodyError::Malformed(format!("sample value {value:?} is not a number")))?;
    Ok(Sample { time, value })
}

/// The start of a body for the log detail of an error (never for a message users read).
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text.chars().take(120).collect();
    if text.chars().count() > 120 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shapes from the Prometheus HTTP API documentation (docs/querying/api.md, "Expression
    // query result formats").
    #[test]
    fn a_vector_with_special_values() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"up","job":"prometheus"},"value":[1435781451.781,"1"]},
            {"metric":{"job":"a"},"value":[1435781451.781,"NaN"]},
            {"metric":{"job":"b"},"value":[1435781451.781,"+Inf"]},
            {"metric":{"job":"c"},"value":[1435781451.781,"-Inf"]},
            {"metric":{"job":"d"},"value":[1435781451.781,"1e+06"]}]}}"#;
        let QueryData::Vector(series) = parse_body(body).unwrap() else {
            panic!("not a vector");
        };
        assert_eq!(series.len(), 5);
        assert_eq!(series[0].labels["job"], "prometheus");
        assert_eq!(
            series[0].samples,
            vec![Sample {
                time: 1_435_781_451.781,
                value: 1.0
            }]
        );
        assert!(series[1].samples[0].value.is_nan());
        assert_eq!(
            series[2].samples[0].value.to_bits(),
            f64::INFINITY.to_bits()
        );
        assert_eq!(
            series[3].samples[0].value.to_bits(),
            f64::NEG_INFINITY.to_bits()
        );
        assert!((series[4].samples[0].value - 1_000_000.0).abs() < f64::EPSILON);
    }

    #[test]
    fn a_matrix_and_a_scalar() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"pod":"web-1"},"values":[[1435781430.781,"1"],[1435781445.781,"2.5"]]}]}}"#;
        let QueryData::Matrix(series) = parse_body(body).unwrap() else {
            panic!("not a matrix");
        };
        assert_eq!(series[0].samples.len(), 2);
        assert!((series[0].samples[1].value - 2.5).abs() < f64::EPSILON);
        let body =
            br#"{"status":"success","data":{"resultType":"scalar","result":[1435781451.781,"7"]}}"#;
        assert_eq!(
            parse_body(body).unwrap(),
            QueryData::Scalar(Sample {
                time: 1_435_781_451.781,
                value: 7.0
            })
        );
        assert!(parse_body(body).unwrap().into_series().is_empty());
    }

    #[test]
    fn an_error_envelope_keeps_type_and_message() {
        let body = br#"{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected \")\""}"#;
        assert_eq!(
            parse_body(body).unwrap_err(),
            BodyError::Rejected {
                error_type: "bad_data".into(),
                error: "1:5: parse error: unexpected \")\"".into()
            }
        );
    }

    #[test]
    fn bodies_that_are_not_the_api_are_malformed() {
        for body in [
            &b"<html>502 Bad Gateway</html>"[..],
            br#"{"status":"success"}"#,
            br#"{"status":"success","data":{"resultType":"histogram","result":[]}}"#,
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#,
        ] {
            assert!(
                matches!(parse_body(body), Err(BodyError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
