//! Which values are readings: DCGM's blank sentinels and the staleness marker are dropped and
//! counted, impossible values are rejected with the value shown as Prometheus writes it.

use gpuledger_lake::tables::DCGM_FIELDS;

use super::LineError;

/// Whether `value` can be a reading of `metric` (`column`: its wide column, if a known DCGM field):
/// finite, within what a DCGM field holds (int64 readings, doubles printed from them), never
/// negative for a known field (utilisations, memory, power, energy, clocks, temperatures and
/// counters are all unsigned).
pub(super) fn check_reading(
    metric: &str,
    column: Option<usize>,
    value: f64,
) -> Result<(), LineError> {
    const MAX_READING: f64 = 9.223_372_036_854_776e18;
    if !value.is_finite() {
        return Err(LineError::new(
            metric,
            format!("{} is not a reading (only finite values are)", shown(value)),
        ));
    }
    if value.abs() >= MAX_READING {
        return Err(LineError::new(
            metric,
            format!(
                "{} is out of range for a DCGM field (at most 2^63 in magnitude)",
                shown(value)
            ),
        ));
    }
    let Some(column) = column else {
        return Ok(());
    };
    let name = DCGM_FIELDS[column].1;
    if value < 0.0 {
        return Err(LineError::new(
            metric,
            format!("{} is negative: {name} cannot be", shown(value)),
        ));
    }
    Ok(())
}

/// A value as Prometheus text writes it: `+Inf`, `-Inf`, and an exponent for very large or small
/// magnitudes.
pub(super) fn shown(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let magnitude = value.abs();
    if magnitude >= 1e16 || (magnitude != 0.0 && magnitude < 1e-4) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// DCGM's "blank" values (no data, not found, not supported, no permission: `DCGM_*_BLANK` + 0..3 in
/// dcgm_structs.h), which dcgm-exporter prints as if they were readings, and Prometheus's
/// staleness marker (the NaN whose bits are `0x7ff0000000000002`: "this series ended", which
/// remote-write sends and text cannot spell). Any other NaN is no reading and no blank: DCGM has
/// no NaN field value (dcgm-exporter leaves a blank field out), so `check_reading` rejects it.
pub(super) fn is_blank(value: f64) -> bool {
    const INT32_BLANK: f64 = 0x7fff_fff0_u32 as f64;
    // 0x7ffffffffffffff0 rounds to 2^63 as a double, and so does every int64 blank printed in full.
    const INT64_BLANK: f64 = 0x7fff_ffff_ffff_fff0_u64 as f64;
    const FP64_BLANK: f64 = 140_737_488_355_328.0; // 2^47
    const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;
    let in_family = |base: f64| value >= base && value <= base + 3.0 && value.fract() == 0.0;
    value.to_bits() == STALE_NAN
        || value == INT64_BLANK
        || in_family(INT32_BLANK)
        || in_family(FP64_BLANK)
}
