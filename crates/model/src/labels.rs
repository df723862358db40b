//! How labels, directories and reports name a matrix point and an
//! instance: one spelling, shared by the planner, the engine and the report.

use indexmap::IndexMap;

/// `fsync=always,depth=1`: a matrix point's values, as labels, directories
/// and the report name it.
pub fn point_label(values: &IndexMap<String, String>) -> String {
    values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// `[fsync=always,depth=1]`, or nothing without a matrix: how labels name a point.
pub fn matrix_suffix(values: &IndexMap<String, String>) -> String {
    match values.is_empty() {
        true => String::new(),
        false => format!("[{}]", point_label(values)),
    }
}

/// `cand[fsync=always]@write-path` → `cand.fsync=always@write-path`: a
/// file name for an instance.
pub fn instance_file_name(instance: &str) -> String {
    instance.replace('[', ".").replace(']', "").replace(',', ".").replace(['/', ' '], "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_named_by_its_values_in_order() {
        let m: IndexMap<String, String> = [("fsync".into(), "always".into()), ("depth".into(), "1".into())].into();
        assert_eq!(point_label(&m), "fsync=always,depth=1");
        assert_eq!(matrix_suffix(&m), "[fsync=always,depth=1]");
        assert_eq!(matrix_suffix(&IndexMap::new()), "");
        assert_eq!(instance_file_name("cand[fsync=always,depth=1]@write-path"), "cand.fsync=always.depth=1@write-path");
    }
}
