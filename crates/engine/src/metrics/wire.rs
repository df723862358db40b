//! How a cell's merged metrics travel from an agent to its coordinator
//! (agent/): every part is serde, and an HDR histogram goes as its
//! recorded buckets, each as (the bucket's highest equivalent value, its
//! count). Recorded again into a histogram of the same bounds, each value
//! falls in the bucket it came from, so the coordinator's histogram is the
//! agent's exactly: every percentile, the count, min and max agree. The
//! hdrhistogram crate's own serializer would bring a compression crate for
//! the same result.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::new_histogram;

fn buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
}

fn rebuilt<E: serde::de::Error>(buckets: Vec<(u64, u64)>) -> Result<Histogram<u64>, E> {
    let mut h = new_histogram();
    for (value, count) in buckets {
        h.record_n(value, count).map_err(|e| E::custom(format!("histogram value {value}: {e:?}")))?;
    }
    Ok(h)
}

/// `#[serde(with = "wire::histogram")]`
pub mod histogram {
    use super::*;

    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        buckets(h).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        rebuilt(Vec::deserialize(d)?)
    }
}

/// `#[serde(with = "wire::optional_histogram")]`
pub mod optional_histogram {
    use super::*;

    pub fn serialize<S: Serializer>(h: &Option<Histogram<u64>>, s: S) -> Result<S::Ok, S::Error> {
        h.as_ref().map(buckets).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Histogram<u64>>, D::Error> {
        Option::<Vec<(u64, u64)>>::deserialize(d)?.map(rebuilt).transpose()
    }
}

/// `#[serde(with = "wire::histograms")]`: one optional histogram per op kind.
pub mod histograms {
    use super::*;

    pub fn serialize<S: Serializer>(hs: &[Option<Histogram<u64>>], s: S) -> Result<S::Ok, S::Error> {
        hs.iter().map(|h| h.as_ref().map(buckets)).collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Option<Histogram<u64>>>, D::Error> {
        let all = Vec::<Option<Vec<(u64, u64)>>>::deserialize(d)?;
        all.into_iter().map(|h| h.map(rebuilt).transpose()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Carried(#[serde(with = "histogram")] Histogram<u64>);

    #[test]
    fn a_histogram_arrives_exactly_as_it_left() {
        let mut h = new_histogram();
        for us in [1u64, 7, 999, 1_000, 1_001, 12_345, 987_654, 3_599_999_999] {
            h.record_n(us, us % 5 + 1).unwrap();
        }
        let bytes = postcard::to_allocvec(&Carried(h.clone())).unwrap();
        let Carried(back) = postcard::from_bytes(&bytes).unwrap();
        assert_eq!((back.len(), back.min(), back.max()), (h.len(), h.min(), h.max()));
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q), "quantile {q}");
        }
        assert_eq!(buckets(&back), buckets(&h));
    }
}
