//! GPU shares: how much of one physical GPU an allocation holds, so that every kind of sharing
//! reconciles to the device that was billed (docs/design.md §4). A whole GPU is 1; a MIG instance is its
//! compute slices over the GPU's slices; a time-sliced replica is 1 / the replicas configured on
//! the GPU; a fractional GPU (HAMi and similar) is its declared fraction.

/// How an allocation holds its GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuRequest<'a> {
    Whole,
    /// A MIG profile such as `1g.10gb`, `3g.40gb`, `1c.3g.40gb`, `1g.10gb+me`.
    Mig(&'a str),
    /// One replica of a GPU that the device plugin time-slices into `replicas`.
    TimeSliced {
        replicas: u32,
    },
    /// A declared fraction in (0, 1].
    Fraction(f64),
}

/// Compute slices of a MIG-capable GPU: 4 on the A30, 7 on A100, H100, H200, B200 and GH200.
pub fn mig_slices_of_model(gpu_model: &str) -> u32 {
    if gpu_model.to_ascii_uppercase().contains("A30") {
        4
    } else {
        7
    }
}

/// Compute slices a MIG profile takes: the number before `g` of its GPU-instance part
/// (`3g.40gb` → 3; `1c.3g.40gb` is one compute instance of a 3g instance → 1 of 3 → 1).
pub fn mig_profile_slices(profile: &str) -> Option<u32> {
    let mut parts = profile.split('.');
    let first = parts.next()?;
    if let Some(compute) = first.strip_suffix('c') {
        return compute.parse().ok();
    }
    first.strip_suffix('g')?.parse().ok()
}

/// The share of one physical GPU, or an error naming what is wrong with the request.
pub fn gpu_share(request: &GpuRequest<'_>, gpu_model: &str) -> Result<f64, String> {
    match request {
        GpuRequest::Whole => Ok(1.0),
        GpuRequest::Mig(profile) => {
            let slices = mig_profile_slices(profile)
                .ok_or_else(|| format!("'{profile}' is not a MIG profile"))?;
            let total = mig_slices_of_model(gpu_model);
            if slices == 0 || slices > total {
                return Err(format!(
                    "MIG profile '{profile}' takes {slices} of {total} slices"
                ));
            }
            Ok(slices as f64 / total as f64)
        }
        GpuRequest::TimeSliced { replicas } if *replicas >= 1 => Ok(1.0 / *replicas as f64),
        GpuRequest::TimeSliced { .. } => Err("time-slicing replicas must be at least 1".into()),
        GpuRequest::Fraction(f) if *f > 0.0 && *f <= 1.0 => Ok(*f),
        GpuRequest::Fraction(f) => Err(format!("gpu_fraction {f} is not in (0, 1]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_every_kind() {
        assert_eq!(
            gpu_share(&GpuRequest::Whole, "NVIDIA H100 80GB HBM3"),
            Ok(1.0)
        );
        assert_eq!(
            gpu_share(&GpuRequest::Mig("1g.10gb"), "NVIDIA H100 80GB HBM3"),
            Ok(1.0 / 7.0)
        );
        assert_eq!(
            gpu_share(&GpuRequest::Mig("3g.40gb"), "NVIDIA H100 80GB HBM3"),
            Ok(3.0 / 7.0)
        );
        assert_eq!(
            gpu_share(&GpuRequest::Mig("1g.10gb+me"), "NVIDIA H100"),
            Ok(1.0 / 7.0)
        );
        assert_eq!(
            gpu_share(&GpuRequest::Mig("2g.12gb"), "NVIDIA A30"),
            Ok(0.5)
        );
        assert_eq!(
            gpu_share(&GpuRequest::Mig("1c.3g.40gb"), "NVIDIA A100"),
            Ok(1.0 / 7.0)
        );
        assert_eq!(
            gpu_share(&GpuRequest::TimeSliced { replicas: 4 }, "NVIDIA L4"),
            Ok(0.25)
        );
        assert_eq!(
            gpu_share(&GpuRequest::Fraction(0.25), "NVIDIA L4"),
            Ok(0.25)
        );
    }

    #[test]
    fn impossible_requests_are_errors() {
        assert!(
            gpu_share(&GpuRequest::Mig("8g.90gb"), "NVIDIA H100")
                .unwrap_err()
                .contains("8 of 7")
        );
        assert!(gpu_share(&GpuRequest::Mig("big"), "NVIDIA H100").is_err());
        assert!(gpu_share(&GpuRequest::Fraction(1.5), "NVIDIA L4").is_err());
        assert!(gpu_share(&GpuRequest::TimeSliced { replicas: 0 }, "NVIDIA L4").is_err());
    }
}
