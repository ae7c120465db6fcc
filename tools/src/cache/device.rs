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
    /// The CUDA driver's version as `cuDriverGetVersion` gives it (13000 for 13.0): a
    /// driver update may change what the fastest config is (its PTX JIT, its scheduling), so
    /// it is part of the key. 0 when `TLC_CACHE_DEVICE` names none.
    pub driver: i32,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} SMs, driver {})",
            self.name, self.sms, self.driver
        )
    }
}

impl DeviceId {
    /// The identity of an open GPU (what `tlc tune` keys its winner with).
    pub fn of(gpu: &tlc_runtime::Gpu) -> DeviceId {
        DeviceId {
            name: gpu.name().to_string(),
            sms: gpu.sm_count(),
            driver: gpu.driver_version(),
        }
    }

    /// Parses `NAME:SMS` or `NAME:SMS:DRIVER` (the name may itself contain `:`; the
    /// numbers are the last one or two fields; without DRIVER it is 0).
    pub fn parse(text: &str) -> Result<DeviceId, String> {
        let bad = || {
            format!(
                "{DEVICE_ENV}=`{text}`: expected NAME:SMS or NAME:SMS:DRIVER, e.g. `NVIDIA H100 \
                 80GB HBM3:132:13000`"
            )
        };
        let (rest, last) = text.rsplit_once(':').ok_or_else(bad)?;
        let last: u32 = last.trim().parse().map_err(|_| bad())?;
        // NAME:SMS:DRIVER when the field before the last is a number too.
        let (name, sms, driver) = match rest.rsplit_once(':') {
            Some((name, sms)) if sms.trim().parse::<u32>().is_ok() => {
                let sms = sms.trim().parse::<u32>().map_err(|_| bad())?;
                let driver = i32::try_from(last).map_err(|_| bad())?;
                (name, sms, driver)
            }
            _ => (rest, last, 0),
        };
        let name = name.trim();
        if name.is_empty() || sms == 0 {
            return Err(bad());
        }
        Ok(DeviceId {
            name: name.to_string(),
            sms,
            driver,
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
        assert_eq!((d.sms, d.driver), (132, 0));
        let d = DeviceId::parse("NVIDIA H200:132:13000").unwrap();
        assert_eq!(
            (d.name.as_str(), d.sms, d.driver),
            ("NVIDIA H200", 132, 13000)
        );
        assert_eq!(DeviceId::parse("a:b:7").unwrap().name, "a:b");
        for bad in [
            "H100",
            "H100:",
            ":132",
            "H100:0",
            "H100:x",
            "H100:0:13000",
            ":1:2",
        ] {
            let e = DeviceId::parse(bad).unwrap_err();
            assert!(e.contains("expected NAME:SMS"), "{bad}: {e}");
        }
    }
}
