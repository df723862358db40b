//! The spec's `config` map, handed to a plugin as JSON text.

/// A plugin's config. With the `json` feature (default) it is parsed once and
/// has typed getters that name the key in their errors; without it, only the
/// text is there.
///
/// Getters accept a key spelled with `_` or `-` interchangeably
/// (`max_p99_ms` finds `max-p99-ms` too).
#[derive(Debug, Clone)]
pub struct Config {
    text: String,
    #[cfg(feature = "json")]
    value: serde_json::Value,
}

impl Config {
    /// Parses the config text; empty text is an empty map.
    pub fn parse(text: &str) -> Result<Config, String> {
        #[cfg(feature = "json")]
        {
            let value = if text.trim().is_empty() {
                serde_json::Value::Object(Default::default())
            } else {
                serde_json::from_str(text).map_err(|e| format!("config is not valid JSON: {e}"))?
            };
            if !(value.is_object() || value.is_null()) {
                return Err(format!("config must be a map, got {text}"));
            }
            Ok(Config { text: text.to_string(), value })
        }
        #[cfg(not(feature = "json"))]
        Ok(Config { text: text.to_string() })
    }

    /// The JSON text as the host sent it.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(feature = "json")]
impl Config {
    /// The parsed JSON (an object, or null).
    pub fn json(&self) -> &serde_json::Value {
        &self.value
    }

    /// The value at `key`, if present and not null.
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        let map = self.value.as_object()?;
        let found = map.get(key).or_else(|| {
            let other: String = key
                .chars()
                .map(|c| {
                    if c == '_' {
                        '-'
                    } else if c == '-' {
                        '_'
                    } else {
                        c
                    }
                })
                .collect();
            map.get(&other)
        });
        found.filter(|v| !v.is_null())
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// A number, if present.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| format!("config `{key}` must be a number, got {v}")),
        }
    }

    /// A number, or `default` when absent.
    pub fn f64(&self, key: &str, default: f64) -> Result<f64, String> {
        Ok(self.opt_f64(key)?.unwrap_or(default))
    }

    /// A non-negative integer, if present.
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => {
                v.as_u64().map(Some).ok_or_else(|| format!("config `{key}` must be a non-negative integer, got {v}"))
            }
        }
    }

    /// A non-negative integer, or `default` when absent.
    pub fn u64(&self, key: &str, default: u64) -> Result<u64, String> {
        Ok(self.opt_u64(key)?.unwrap_or(default))
    }

    /// A boolean, or `default` when absent.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| format!("config `{key}` must be true or false, got {v}")),
        }
    }

    /// A string, if present.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| format!("config `{key}` must be a string, got {v}")),
        }
    }

    /// A string, or `default` when absent.
    pub fn str<'a>(&'a self, key: &str, default: &'a str) -> Result<&'a str, String> {
        Ok(self.opt_str(key)?.unwrap_or(default))
    }

    /// A list of strings (a single string counts as a list of one); empty
    /// when absent.
    pub fn str_list(&self, key: &str) -> Result<Vec<String>, String> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(serde_json::Value::String(s)) => Ok(vec![s.clone()]),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str().map(str::to_string).ok_or_else(|| format!("config `{key}` must list strings, got {i}"))
                })
                .collect(),
            Some(v) => Err(format!("config `{key}` must be a list of strings, got {v}")),
        }
    }

    /// Fails on a key not in `known`, so a misspelt threshold is not silently
    /// ignored.
    pub fn deny_unknown(&self, known: &[&str]) -> Result<(), String> {
        let norm = |k: &str| k.replace('-', "_");
        if let Some(map) = self.value.as_object() {
            for key in map.keys() {
                if !known.iter().any(|k| norm(k) == norm(key)) {
                    return Err(format!("unknown config key `{key}` (known: {})", known.join(", ")));
                }
            }
        }
        Ok(())
    }
}

#[cfg(all(test, feature = "json"))]
mod tests {
    use super::*;

    #[test]
    fn getters() {
        let c = Config::parse(r#"{"max-p99-ms": 5, "hot": 64, "names": ["a", "b"], "on": true, "s": "x"}"#).unwrap();
        assert_eq!(c.f64("max_p99_ms", 1.0).unwrap(), 5.0);
        assert_eq!(c.u64("hot", 1).unwrap(), 64);
        assert_eq!(c.u64("cold", 7).unwrap(), 7);
        assert_eq!(c.str_list("names").unwrap(), vec!["a", "b"]);
        assert!(c.bool("on", false).unwrap());
        assert_eq!(c.str("s", "y").unwrap(), "x");
        assert!(c.u64("s", 0).is_err());
        assert!(c.deny_unknown(&["max_p99_ms", "hot", "names", "on"]).is_err());
        assert!(c.deny_unknown(&["max_p99_ms", "hot", "names", "on", "s"]).is_ok());
        assert!(Config::parse("").unwrap().get("x").is_none());
        assert!(Config::parse("[1]").is_err());
        assert!(Config::parse("{").is_err());
    }
}
