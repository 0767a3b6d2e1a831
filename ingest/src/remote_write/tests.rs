use chrono::Utc;
use gpuledger_lake::tables::Table;

use super::*;
use crate::record::CollectSink;

fn series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
    TimeSeries {
        labels: labels
            .iter()
            .map(|(name, value)| Label {
                name: name.to_string(),
                value: value.to_string(),
            })
            .collect(),
        samples: samples
            .iter()
            .map(|&(value, timestamp)| Sample { value, timestamp })
            .collect(),
    }
}

fn body(request: &WriteRequest) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .unwrap()
}

fn context() -> ParseContext {
    let mut ctx = ParseContext::new("remote-write", Utc::now());
    ctx.cluster = Some("lab".into());
    ctx
}

/// Both time series of GPU 0 at two scrape times, a node_exporter series, and one MIG series.
fn request() -> WriteRequest {
    let gpu0 = |name| {
        vec![
            ("__name__", name),
            ("Hostname", "n1"),
            ("UUID", "GPU-a"),
            ("gpu", "0"),
            ("modelName", "NVIDIA H100"),
        ]
    };
    WriteRequest {
        timeseries: vec![
            series(
                &gpu0("DCGM_FI_DEV_GPU_TEMP"),
                &[(41.0, 1_780_000_000_000), (42.0, 1_780_000_015_000)],
            ),
            series(
                &[("__name__", "node_load1"), ("instance", "n1")],
                &[(0.5, 1_780_000_000_000)],
            ),
            series(
                &gpu0("DCGM_FI_DEV_POWER_USAGE"),
                &[(71.5, 1_780_000_000_000), (72.5, 1_780_000_015_000)],
            ),
            series(
                &[
                    ("__name__", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
                    ("GPU_I_ID", "3"),
                    ("GPU_I_PROFILE", "1g.10gb"),
                    ("Hostname", "n1"),
                    ("UUID", "GPU-a"),
                    ("gpu", "0"),
                ],
                &[(0.25, 1_780_000_000_000)],
            ),
        ],
    }
}

/// The same samples as dcgm-exporter text with timestamps.
const AS_TEXT: &str = "\
DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA H100\",Hostname=\"n1\"} 41 1780000000000
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA H100\",Hostname=\"n1\"} 71.5 1780000000000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",UUID=\"GPU-a\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"3\",Hostname=\"n1\"} 0.25 1780000000000
DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA H100\",Hostname=\"n1\"} 42 1780000015000
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA H100\",Hostname=\"n1\"} 72.5 1780000015000
";

#[test]
fn dcgm_series_land_as_the_same_rows_as_the_text_scrape() {
    let ctx = context();
    let mut sink = CollectSink::default();
    let stats = parse(&mut body(&request()).as_slice(), &ctx, &mut sink).unwrap();
    // 2 + 1 + 2 + 1 samples; node_load1 is not DCGM's.
    assert_eq!(stats.samples, 6);
    assert_eq!(stats.ignored_series, 1);
    assert_eq!(stats.dcgm.samples, 5);

    let mut text_sink = CollectSink::default();
    dcgm::parse(&mut AS_TEXT.as_bytes(), &ctx, &mut text_sink).unwrap();
    // Rows: GPU 0 at two times, its MIG instance at the first: three wide rows, nothing extra.
    assert_eq!(sink.rows(Table::GpuSamples), 3);
    assert_eq!(sink.rows(Table::GpuSamplesExtra), 0);
    assert_eq!(
        sink.table(Table::GpuSamples),
        text_sink.table(Table::GpuSamples)
    );
    assert!(sink.rejections.is_empty());
}

#[test]
fn a_bad_sample_is_rejected_with_its_series_position() {
    let mut request = request();
    // The same series twice at the same time: the second value is a duplicate.
    request.timeseries.push(request.timeseries[0].clone());
    let mut sink = CollectSink::default();
    parse(&mut body(&request).as_slice(), &context(), &mut sink).unwrap();
    let rejected = sink.rejected_fields();
    assert_eq!(
        rejected,
        [(5, "DCGM_FI_DEV_GPU_TEMP"), (5, "DCGM_FI_DEV_GPU_TEMP")]
    );
    assert_eq!(
        sink.rejections[0].raw,
        "DCGM_FI_DEV_GPU_TEMP{Hostname=\"n1\",UUID=\"GPU-a\",gpu=\"0\",modelName=\"NVIDIA H100\"} 41 1780000000000"
    );
}

#[test]
fn a_body_that_is_not_snappy_protobuf_is_a_format_error() {
    let ctx = context();
    let mut sink = CollectSink::default();
    let error = parse(&mut &b"DCGM_FI_DEV_GPU_TEMP 1\n"[..], &ctx, &mut sink).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("remote-write: not a snappy-compressed (block format) body"),
        "{error}"
    );
}

#[test]
fn series_in_reverse_order_land_the_rows_of_the_text_scrapes() {
    use crate::dcgm::tests::{
        FLEET_MS, assert_fleet_rows, fleet, fleet_context, fleet_scrape_grouped, wide_batches,
    };
    // One time series per (series, family) of the fleet, the last first: each carries its three
    // samples, so the cells of one row arrive far apart.
    let mut timeseries: Vec<TimeSeries> = fleet()
        .iter()
        .map(|s| {
            let mut labels = vec![("__name__", s.metric)];
            labels.extend(s.labels.iter().copied());
            let samples: Vec<(f64, i64)> = s
                .values
                .iter()
                .zip(FLEET_MS)
                .map(|(value, ms)| (value.parse().unwrap(), ms))
                .collect();
            series(&labels, &samples)
        })
        .collect();
    timeseries.reverse();
    let ctx = fleet_context();
    let mut sink = CollectSink::default();
    let stats = parse(
        &mut body(&WriteRequest { timeseries }).as_slice(),
        &ctx,
        &mut sink,
    )
    .unwrap();
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!((stats.samples, stats.dcgm.rows_wide), (63, 18));

    let mut text_sink = CollectSink::default();
    dcgm::parse(&mut fleet_scrape_grouped().as_bytes(), &ctx, &mut text_sink).unwrap();
    let batches = wide_batches(&sink);
    assert_eq!(batches, wide_batches(&text_sink));
    assert_fleet_rows(&batches[0]);
}
