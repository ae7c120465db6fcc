//! One cache entry on disk: a small JSON file holding the key's inputs (readable, and
//! checked on lookup), the chosen config, what it measured, and when.

use super::key::Key;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tlc_ir::tuning::Config;

/// The entry format's version; an entry of another format is ignored with a warning.
pub const FORMAT: u32 = 2;

/// What `tlc tune` stores for a key: the winning config and, when measured, its time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entry {
    /// A value for every tunable of the kernel.
    pub config: Config,
    /// The config's median time in milliseconds.
    pub time_ms: Option<f64>,
    /// Its throughput, for kernels that have one (GEMMs).
    pub tflops: Option<f64>,
}

/// The JSON file, field for field (other fields, such as a note a user adds, are ignored).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Stored {
    pub format: u32,
    pub kernel: String,
    /// FNV-1a of the kernel's text without its tuning space, 16 hex digits.
    pub kernel_hash: String,
    pub dims: BTreeMap<String, i64>,
    pub device: String,
    pub sms: u32,
    /// The CUDA driver's version (`cuDriverGetVersion`).
    pub driver: i32,
    pub target: String,
    pub tlc_version: String,
    pub config: BTreeMap<String, i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
}

impl Stored {
    pub fn new(key: &Key, entry: &Entry, date: String) -> Stored {
        Stored {
            format: FORMAT,
            kernel: key.kernel.clone(),
            kernel_hash: format!("{:016x}", key.kernel_hash()),
            dims: key.dims.iter().cloned().collect(),
            device: key.device.name.clone(),
            sms: key.device.sms,
            driver: key.device.driver,
            target: key.target.name().to_string(),
            tlc_version: key.version.clone(),
            config: entry.config.iter().cloned().collect(),
            time_ms: entry.time_ms.filter(|t| t.is_finite()),
            tflops: entry.tflops.filter(|t| t.is_finite()),
            date,
        }
    }

    /// The stored config in the kernel's declaration order, when this entry belongs to
    /// `key` and its config is one the kernel can take; otherwise why not.
    pub fn config_for(&self, key: &Key) -> Result<Config, String> {
        if self.format != FORMAT {
            return Err(format!(
                "it has format {}, this tlc reads format {FORMAT}",
                self.format
            ));
        }
        let mine = Stored::new(key, &Entry::default(), String::new());
        let inputs = |s: &Stored| {
            (
                s.kernel.clone(),
                s.kernel_hash.clone(),
                s.dims.clone(),
                s.device.clone(),
                s.sms,
                s.driver,
                s.target.clone(),
                s.tlc_version.clone(),
            )
        };
        if inputs(self) != inputs(&mine) {
            return Err(
                "the key it records (kernel, dims, device, driver, target, tlc version) is not this \
                 compile's (an edited file, or a hash collision)"
                    .to_string(),
            );
        }
        let config: Config = self.config.iter().map(|(n, v)| (n.clone(), *v)).collect();
        check_config(key, &config)
    }
}

/// `config` in the kernel's declaration order, when it names exactly the kernel's
/// tunables and satisfies its constraints (with the key's dims); otherwise why not.
pub(super) fn check_config(key: &Key, config: &Config) -> Result<Config, String> {
    let names: Vec<&str> = key.space.names().collect();
    let value = |n: &str| config.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| value(n).is_none())
        .collect();
    let extra: Vec<&str> = config
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !names.contains(n))
        .collect();
    let mut seen: Vec<&str> = config.iter().map(|(n, _)| n.as_str()).collect();
    seen.sort_unstable();
    let twice = seen.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
    if !missing.is_empty() || !extra.is_empty() || twice.is_some() {
        let mut why = Vec::new();
        if !missing.is_empty() {
            why.push(format!("lacks {}", missing.join(", ")));
        }
        if !extra.is_empty() {
            why.push(format!(
                "names {}, not tunables of the kernel",
                extra.join(", ")
            ));
        }
        if let Some(n) = twice {
            why.push(format!("names {n} twice"));
        }
        return Err(format!(
            "its config {} (the kernel's tunables: {})",
            why.join("; "),
            names.join(", ")
        ));
    }
    let ordered: Config = names
        .iter()
        .filter_map(|n| value(n).map(|v| (n.to_string(), v)))
        .collect();
    match key.space.violated(&ordered, &key.dims) {
        Ok(None) => Ok(ordered),
        Ok(Some(c)) => Err(format!(
            "its config {} breaks the constraint `{c}`",
            tlc_ir::tuning::describe(&ordered)
        )),
        Err(e) => Err(e.message),
    }
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ`.
pub(super) fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Seconds since 1970-01-01 as a UTC date and time (the proleptic Gregorian calendar's
/// days-to-date conversion, H. Hinnant's `civil_from_days`).
pub(super) fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        // `date -u -d @951782400`: the leap day of a century divisible by 400.
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc(4_102_444_799), "2099-12-31T23:59:59Z");
    }
}
