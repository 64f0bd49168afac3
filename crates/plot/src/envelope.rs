//! Per-pixel-column envelopes: how a series of more points than its panel has pixel columns is
//! drawn without thousands of overlapping segments.
//!
//! [`reduce`] splits the x range into equal columns (one per pixel) and keeps, per column that
//! holds points, the lowest and highest value (the band a reader sees as "how far it swung"),
//! the mean and the last value (the line drawn over the band). A series with no more points
//! than columns comes back unchanged, so short replays draw exactly as before. Invariants:
//! every point lands in exactly one column (points beyond the range in the edge column), and a
//! column's `min`/`max` are the true extremes of its points.

/// One pixel column of a reduced series, in data units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Column {
    /// The column's index, 0 at the range's low end.
    pub index: usize,
    /// The lowest value of the column's points.
    pub min: f64,
    /// The highest value of the column's points.
    pub max: f64,
    /// The mean of the column's points.
    pub mean: f64,
    /// The value of the column's last point (by order in the series).
    pub last: f64,
}

/// A series as it is drawn: its points, or one [`Column`] per pixel column that holds any.
#[derive(Clone, Debug, PartialEq)]
pub enum Reduced {
    /// No more points than columns: drawn point by point.
    Points(Vec<(f64, f64)>),
    /// More points than columns: the columns that hold points, in order.
    Columns(Vec<Column>),
}

/// `points` (x, value), ordered by x, over the x range `lo`…`hi` split into `columns` equal
/// columns: unchanged when there are at most `columns` points, else their envelopes.
pub fn reduce(points: Vec<(f64, f64)>, lo: f64, hi: f64, columns: usize) -> Reduced {
    if points.len() <= columns || columns == 0 {
        return Reduced::Points(points);
    }
    let width = (hi - lo).max(f64::EPSILON);
    let last_index = columns - 1;
    let mut out: Vec<Column> = Vec::with_capacity(columns);
    let mut count = 0.0;
    for (x, v) in points {
        // Truncation is the bucketing; NaN and negative fractions land in column 0.
        let index = (((x - lo) / width * columns as f64).floor().max(0.0) as usize).min(last_index);
        match out.last_mut() {
            Some(c) if c.index == index => {
                c.min = c.min.min(v);
                c.max = c.max.max(v);
                count += 1.0;
                c.mean += (v - c.mean) / count;
                c.last = v;
            }
            _ => {
                count = 1.0;
                out.push(Column {
                    index,
                    min: v,
                    max: v,
                    mean: v,
                    last: v,
                });
            }
        }
    }
    Reduced::Columns(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_thousand_points_over_500_columns_keep_each_columns_extremes() {
        // A wiggle with a spike every 97 points, so extremes fall anywhere within a column.
        let points: Vec<(f64, f64)> = (0..10_000)
            .map(|i| {
                let x = f64::from(i);
                let spike = if i % 97 == 0 { 50.0 } else { 0.0 };
                (x, (x * 0.37).sin() * 10.0 + spike - f64::from(i % 13))
            })
            .collect();
        let Reduced::Columns(columns) = reduce(points.clone(), 0.0, 10_000.0, 500) else {
            panic!("10,000 points over 500 columns are reduced");
        };
        assert_eq!(columns.len(), 500);
        for (i, c) in columns.iter().enumerate() {
            assert_eq!(c.index, i);
            let own = &points[i * 20..(i + 1) * 20];
            let min = own.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            let max = own.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
            let mean = own.iter().map(|p| p.1).sum::<f64>() / 20.0;
            assert!(
                (c.min - min).abs() < 1e-12 && (c.max - max).abs() < 1e-12,
                "{c:?}"
            );
            assert!((c.mean - mean).abs() < 1e-9, "{c:?} mean {mean}");
            assert!((c.last - own[19].1).abs() < 1e-12);
        }
    }

    #[test]
    fn few_points_pass_through_unchanged() {
        let points = vec![(0.0, 1.0), (10.0, 5.0), (20.0, -2.0)];
        assert_eq!(
            reduce(points.clone(), 0.0, 20.0, 800),
            Reduced::Points(points.clone())
        );
        assert_eq!(
            reduce(points.clone(), 0.0, 20.0, 3),
            Reduced::Points(points),
            "as many points as columns"
        );
    }

    #[test]
    fn points_outside_the_range_go_to_the_edge_columns_and_empty_columns_are_left_out() {
        let points = vec![
            (-5.0, 1.0),
            (0.0, 2.0),
            (1.0, 3.0),
            (99.0, 4.0),
            (150.0, 9.0),
        ];
        let Reduced::Columns(columns) = reduce(points, 0.0, 100.0, 4) else {
            panic!("5 points over 4 columns are reduced");
        };
        let got: Vec<(usize, f64, f64)> = columns.iter().map(|c| (c.index, c.min, c.max)).collect();
        assert_eq!(got, vec![(0, 1.0, 3.0), (3, 4.0, 9.0)]);
    }
}
