//! The device a tuning-cache key names: the GPU's name and SM count, read from the driver
//! without opening the GPU, or given by `TLC_CACHE_DEVICE` (for tests and for looking up
//! another machine's entries).

use std::fmt;

/// `TLC_CACHE_DEVICE="NAME:SMS"`, e.g. `"NVIDIA H100 80GB HBM3:132"`: the device identity the
/// commands key the tuning cache with, instead of GPU 0's. Only the key uses it: a command
/// that runs on the GPU still runs on the real one.
pub const DEVICE_ENV: &str = "TLC_CACHE_DEVICE";

/// What the cache key says about the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceId {
    /// The driver's name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Streaming multiprocessors (132 on an H100 SXM).
    pub sms: u32,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} SMs)", self.name, self.sms)
    }
}

impl DeviceId {
    /// The identity of an open GPU (what `tlc tune` keys its winner with).
    pub fn of(gpu: &tlc_runtime::Gpu) -> DeviceId {
        DeviceId {
            name: gpu.name().to_string(),
            sms: gpu.sm_count(),
        }
    }

    /// Parses `NAME:SMS` (the name may itself contain `:`; the count is after the last).
    pub fn parse(text: &str) -> Result<DeviceId, String> {
        let bad = || {
            format!("{DEVICE_ENV}=`{text}`: expected NAME:SMS, e.g. `NVIDIA H100 80GB HBM3:132`")
        };
        let (name, sms) = text.rsplit_once(':').ok_or_else(bad)?;
        let sms: u32 = sms.trim().parse().map_err(|_| bad())?;
        let name = name.trim();
        if name.is_empty() || sms == 0 {
            return Err(bad());
        }
        Ok(DeviceId {
            name: name.to_string(),
            sms,
        })
    }

    /// `TLC_CACHE_DEVICE`, when set (an error when it does not parse).
    pub fn from_env() -> Option<Result<DeviceId, String>> {
        let text = std::env::var(DEVICE_ENV).ok()?;
        Some(DeviceId::parse(&text))
    }
}

/// GPU 0 as the driver describes it, without opening it; `Err` says why there is none
/// (no driver, no GPU).
pub fn gpu0() -> Result<tlc_runtime::DeviceInfo, String> {
    tlc_runtime::Gpu::info(0).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_name_and_sm_count() {
        let d = DeviceId::parse("NVIDIA H100 80GB HBM3:132").unwrap();
        assert_eq!(d.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(d.sms, 132);
        assert_eq!(DeviceId::parse("a:b:7").unwrap().name, "a:b");
        for bad in ["H100", "H100:", ":132", "H100:0", "H100:x"] {
            let e = DeviceId::parse(bad).unwrap_err();
            assert!(e.contains("expected NAME:SMS"), "{bad}: {e}");
        }
    }
}
