use std::collections::BTreeSet;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float64Type, Int32Type, TimestampMicrosecondType};
use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::record::CollectSink;
use crate::testdata::shared_data;

/// Scrape time given to untimestamped inputs.
fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 10, 0, 0).unwrap()
}

fn context() -> ParseContext {
    ParseContext::new("test.prom", at())
}

fn run_with(text: &str, ctx: &ParseContext) -> (CollectSink, DcgmStats) {
    let mut sink = CollectSink::default();
    let stats = parse(&mut text.as_bytes(), ctx, &mut sink).expect("parses");
    (sink, stats)
}

fn run(text: &str) -> (CollectSink, DcgmStats) {
    run_with(text, &context())
}

fn run_file(relative: &str, ctx: &ParseContext) -> Option<(CollectSink, DcgmStats)> {
    let path = shared_data(relative)?;
    let text = std::fs::read_to_string(&path).unwrap();
    Some(run_with(&text, ctx))
}

fn strings(batch: &RecordBatch, column: &str) -> Vec<Option<String>> {
    let array = batch.column_by_name(column).unwrap().as_string::<i32>();
    (0..array.len())
        .map(|i| array.is_valid(i).then(|| array.value(i).to_owned()))
        .collect()
}

fn floats(batch: &RecordBatch, column: &str) -> Vec<Option<f64>> {
    let array = batch
        .column_by_name(column)
        .unwrap()
        .as_primitive::<Float64Type>();
    (0..array.len())
        .map(|i| array.is_valid(i).then(|| array.value(i)))
        .collect()
}

fn ints(batch: &RecordBatch, column: &str) -> Vec<Option<i32>> {
    let array = batch
        .column_by_name(column)
        .unwrap()
        .as_primitive::<Int32Type>();
    (0..array.len())
        .map(|i| array.is_valid(i).then(|| array.value(i)))
        .collect()
}

fn times(batch: &RecordBatch) -> Vec<i64> {
    batch
        .column_by_name("ts")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>()
        .values()
        .to_vec()
}

/// Number of DCGM field values present in each row.
fn values_per_row(batch: &RecordBatch) -> Vec<usize> {
    (0..batch.num_rows())
        .map(|row| {
            DCGM_FIELDS
                .iter()
                .filter(|(_, column)| batch.column_by_name(column).unwrap().is_valid(row))
                .count()
        })
        .collect()
}

fn one(value: &str) -> Vec<Option<String>> {
    vec![Some(value.to_owned())]
}

fn stats(lines: u64, samples: u64, rows_wide: u64, rows_extra: u64) -> DcgmStats {
    DcgmStats {
        lines,
        samples,
        rows_wide,
        rows_extra,
        sentinels_dropped: 0,
        rejected: 0,
    }
}

const GPU0: &str = r#"gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:1A:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15""#;
const GPU1: &str = r#"gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15""#;

// ---- the real scrapes in shared/data ----

#[test]
fn l4_on_aws_lands_as_one_full_row() {
    let Some((sink, stats)) = run_file(
        "cncf-k8s-ai-conformance/dcgm-exporter-kops-aws-L4.prom",
        &context(),
    ) else {
        return;
    };
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(69, 23, 1, 0));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(times(&rows), vec![at().timestamp_micros()]);
    assert_eq!(strings(&rows, "cluster"), one("default"));
    assert_eq!(strings(&rows, "node"), one("i-030791dc5a37cd257"));
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        one("GPU-c2f76b33-7953-256e-8f33-1343419b1a1c")
    );
    assert_eq!(ints(&rows, "gpu_index"), vec![Some(0)]);
    assert_eq!(strings(&rows, "gpu_model"), one("NVIDIA L4"));
    assert_eq!(strings(&rows, "pci_bus_id"), one("00000000:31:00.0"));
    assert_eq!(strings(&rows, "driver_version"), one("580.105.08"));
    assert_eq!(strings(&rows, "mig_profile"), vec![None]);
    assert_eq!(ints(&rows, "mig_instance"), vec![None]);
    assert_eq!(strings(&rows, "labels"), vec![None]);
    assert_eq!(floats(&rows, "sm_clock_mhz"), vec![Some(210.0)]);
    assert_eq!(floats(&rows, "mem_clock_mhz"), vec![Some(405.0)]);
    assert_eq!(floats(&rows, "power_w"), vec![Some(16.365)]);
    assert_eq!(floats(&rows, "energy_mj"), vec![Some(4_742_776.0)]);
    assert_eq!(floats(&rows, "fb_free_mib"), vec![Some(22563.0)]);
    assert_eq!(floats(&rows, "fb_reserved_mib"), vec![Some(470.0)]);
    assert_eq!(floats(&rows, "pcie_tx_bytes_per_s"), vec![Some(112_603.0)]);
    assert_eq!(floats(&rows, "pcie_rx_bytes_per_s"), vec![Some(17544.0)]);
    assert_eq!(floats(&rows, "gr_engine_active"), vec![Some(0.0)]);
    // Not in this exporter's counter list.
    assert_eq!(floats(&rows, "sm_active"), vec![None]);
    assert_eq!(values_per_row(&rows), vec![23]);
}

#[test]
fn l40s_on_upcloud_takes_the_cluster_of_the_context() {
    let mut ctx = context();
    ctx.cluster = Some("upcloud-fi".into());
    let Some((sink, stats)) = run_file(
        "cncf-k8s-ai-conformance/dcgm-exporter-upcloud-L40S.prom",
        &ctx,
    ) else {
        return;
    };
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(69, 23, 1, 0));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(strings(&rows, "cluster"), one("upcloud-fi"));
    assert_eq!(strings(&rows, "node"), one("gpu1-wl8sg"));
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        one("GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43")
    );
    assert_eq!(strings(&rows, "gpu_model"), one("NVIDIA L40S"));
    assert_eq!(strings(&rows, "driver_version"), one("595.58.03"));
    assert_eq!(floats(&rows, "power_w"), vec![Some(35.686)]);
    assert_eq!(floats(&rows, "energy_mj"), vec![Some(5_551_899_580.0)]);
    assert_eq!(floats(&rows, "dram_active"), vec![Some(0.000131)]);
    assert_eq!(floats(&rows, "fb_free_mib"), vec![Some(45459.0)]);
    assert_eq!(values_per_row(&rows), vec![23]);
}

#[test]
fn viettel_excerpt_expands_its_abbreviated_label_sets() {
    // Lines 3–20 write `{gpu="0",...,modelName="NVIDIA L40S",...}`.
    let Some((sink, stats)) = run_file(
        "cncf-k8s-ai-conformance/dcgm-exporter-viettel-L40S.prom",
        &context(),
    ) else {
        return;
    };
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(20, 20, 2, 0));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(ints(&rows, "gpu_index"), vec![Some(0), Some(1)]);
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        vec![
            Some("GPU-a8affe7e-7930-ae20-3fc6-4b0edf3ebbf3".into()),
            Some("GPU-72ad4d20-cfed-f08d-c894-f620962ca3e4".into())
        ]
    );
    assert_eq!(
        strings(&rows, "pci_bus_id"),
        vec![
            Some("00000000:0D:00.0".into()),
            Some("00000000:B4:00.0".into())
        ]
    );
    assert_eq!(strings(&rows, "node"), vec![Some("ubuntu-sv16".into()); 2]);
    assert_eq!(
        strings(&rows, "driver_version"),
        vec![Some("580.126.09".into()); 2]
    );
    assert_eq!(floats(&rows, "power_w"), vec![Some(34.156), Some(34.164)]);
    assert_eq!(floats(&rows, "fb_free_mib"), vec![Some(45457.0); 2]);
    assert_eq!(values_per_row(&rows), vec![10, 10]);
}

#[test]
fn t4_at_ericsson_is_a_busy_gpu() {
    let Some((sink, stats)) = run_file(
        "cncf-k8s-ai-conformance/dcgm-exporter-ericsson-T4.prom",
        &context(),
    ) else {
        return;
    };
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(20, 20, 1, 0));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(strings(&rows, "node"), one("cp-bm14r7"));
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        one("GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a")
    );
    assert_eq!(strings(&rows, "gpu_model"), one("Tesla T4"));
    assert_eq!(floats(&rows, "gpu_util"), vec![Some(91.0)]);
    assert_eq!(floats(&rows, "mem_copy_util"), vec![Some(73.0)]);
    assert_eq!(floats(&rows, "power_w"), vec![Some(68.244)]);
    assert_eq!(floats(&rows, "energy_mj"), vec![Some(15_152_422_938.0)]);
    assert_eq!(floats(&rows, "tensor_active"), vec![Some(0.005822)]);
    assert_eq!(values_per_row(&rows), vec![20]);
}

#[test]
fn vgpu_profiles_keep_their_grid_model_and_license_status() {
    let cases = [
        (
            "10C",
            "conformance-test-np1-qcqc8-bpdtl-wv2gs",
            "GPU-44d2411e-1604-478f-aa96-5a3c00000000",
            9323.0,
            916.0,
            0.0,
        ),
        (
            "40C",
            "test-ai-1-node-pool-40c-d5ds8-br9r6-9tb2c",
            "GPU-0946f70c-659b-4c39-8b78-7e7600000000",
            37739.0,
            3220.0,
            1.0,
        ),
    ];
    for (profile, node, uuid, fb_free, fb_reserved, license) in cases {
        let file =
            format!("cncf-k8s-ai-conformance/dcgm-exporter-vks-GRID-A100-{profile}-vgpu.prom");
        let Some((sink, stats)) = run_file(&file, &context()) else {
            return;
        };
        assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
        assert_eq!(stats, self::stats(33, 11, 1, 0), "{file}");
        let rows = sink.table(Table::GpuSamples);
        assert_eq!(
            strings(&rows, "gpu_model"),
            one(&format!("GRID A100-{profile}"))
        );
        assert_eq!(strings(&rows, "node"), one(node));
        assert_eq!(strings(&rows, "gpu_uuid"), one(uuid));
        assert_eq!(floats(&rows, "sm_clock_mhz"), vec![Some(1410.0)]);
        assert_eq!(floats(&rows, "fb_free_mib"), vec![Some(fb_free)]);
        assert_eq!(floats(&rows, "fb_reserved_mib"), vec![Some(fb_reserved)]);
        assert_eq!(floats(&rows, "vgpu_license_status"), vec![Some(license)]);
        assert_eq!(values_per_row(&rows), vec![11]);
    }
}

#[test]
fn a100_mig_sample_gives_a_row_per_gpu_instance() {
    let Some((sink, stats)) = run_file(
        "nvidia-cloud-native-docs/dcgm-exporter-a100-mig-sample.prom",
        &context(),
    ) else {
        return;
    };
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(22, 21, 2, 0));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        vec![Some("GPU-34319582-d595-d1c7-d1d2-179bcfa61660".into()); 2]
    );
    assert_eq!(
        strings(&rows, "node"),
        vec![Some("ub20-a100-k8s".into()); 2]
    );
    assert_eq!(ints(&rows, "gpu_index"), vec![Some(0), Some(0)]);
    assert_eq!(
        strings(&rows, "mig_profile"),
        vec![None, Some("1g.5gb".into())]
    );
    assert_eq!(ints(&rows, "mig_instance"), vec![None, Some(13)]);
    // Exporter 2.x: no modelName, pci_bus_id or driver label.
    assert_eq!(strings(&rows, "gpu_model"), vec![None, None]);
    assert_eq!(strings(&rows, "pci_bus_id"), vec![None, None]);
    assert_eq!(floats(&rows, "power_w"), vec![Some(409.692), None]);
    assert_eq!(floats(&rows, "energy_mj"), vec![Some(319_159_391.0), None]);
    assert_eq!(
        floats(&rows, "gr_engine_active"),
        vec![Some(0.995630), Some(0.995687)]
    );
    assert_eq!(
        floats(&rows, "tensor_active"),
        vec![Some(0.929260), Some(0.930433)]
    );
    assert_eq!(
        floats(&rows, "dram_active"),
        vec![Some(0.690789), Some(0.800339)]
    );
    assert_eq!(floats(&rows, "xid_last"), vec![Some(0.0), Some(0.0)]);
    assert_eq!(values_per_row(&rows), vec![17, 4]);
}

#[test]
fn the_seven_real_scrapes_hold_eight_gpus() {
    let files = [
        "cncf-k8s-ai-conformance/dcgm-exporter-ericsson-T4.prom",
        "cncf-k8s-ai-conformance/dcgm-exporter-kops-aws-L4.prom",
        "cncf-k8s-ai-conformance/dcgm-exporter-upcloud-L40S.prom",
        "cncf-k8s-ai-conformance/dcgm-exporter-viettel-L40S.prom",
        "cncf-k8s-ai-conformance/dcgm-exporter-vks-GRID-A100-10C-vgpu.prom",
        "cncf-k8s-ai-conformance/dcgm-exporter-vks-GRID-A100-40C-vgpu.prom",
        "nvidia-cloud-native-docs/dcgm-exporter-a100-mig-sample.prom",
    ];
    let mut uuids = BTreeSet::new();
    for file in files {
        let Some((sink, _)) = run_file(file, &context()) else {
            return;
        };
        assert!(sink.rejections.is_empty(), "{file}: {:?}", sink.rejections);
        uuids.extend(
            strings(&sink.table(Table::GpuSamples), "gpu_uuid")
                .into_iter()
                .flatten(),
        );
    }
    assert_eq!(uuids.len(), 8, "{uuids:?}");
}

// ---- edge cases ----

#[test]
fn dcgm_blank_sentinels_and_nan_are_dropped_not_rejected() {
    let text = format!(
        "DCGM_FI_DEV_MEMORY_TEMP{{{GPU0}}} 9223372036854775794\n\
         DCGM_FI_DEV_GPU_TEMP{{{GPU0}}} 2147483634\n\
         DCGM_FI_DEV_POWER_USAGE{{{GPU0}}} 140737488355330.000000\n\
         DCGM_FI_PROF_SM_ACTIVE{{{GPU0}}} NaN\n\
         DCGM_FI_DEV_SM_CLOCK{{{GPU0}}} 1980\n\
         DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU0}}} 2147483636\n"
    );
    let (sink, stats) = run(&text);
    assert!(sink.rejections.is_empty());
    assert_eq!(
        stats,
        DcgmStats {
            lines: 6,
            samples: 2,
            rows_wide: 1,
            rows_extra: 0,
            sentinels_dropped: 4,
            rejected: 0
        }
    );
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(floats(&rows, "memory_temp_c"), vec![None]);
    assert_eq!(floats(&rows, "gpu_temp_c"), vec![None]);
    assert_eq!(floats(&rows, "power_w"), vec![None]);
    assert_eq!(floats(&rows, "sm_active"), vec![None]);
    assert_eq!(floats(&rows, "sm_clock_mhz"), vec![Some(1980.0)]);
    // One past the int32 family is a reading (2.1 MJ since boot is plausible).
    assert_eq!(floats(&rows, "energy_mj"), vec![Some(2_147_483_636.0)]);
}

#[test]
fn blank_families_match_dcgm_structs() {
    for blank in [
        "9223372036854775792",
        "9223372036854775807",
        "2147483632",
        "2147483635",
    ] {
        assert!(is_blank(parse_value(blank.as_bytes()).unwrap()), "{blank}");
    }
    for blank in ["140737488355328", "140737488355331.000000", "NaN"] {
        assert!(is_blank(parse_value(blank.as_bytes()).unwrap()), "{blank}");
    }
    for reading in [
        "2147483631",
        "140737488355332",
        "140737488355328.5",
        "0",
        "+Inf",
        "-Inf",
    ] {
        assert!(
            !is_blank(parse_value(reading.as_bytes()).unwrap()),
            "{reading}"
        );
    }
}

#[test]
fn a_line_with_a_bad_value_is_rejected_and_the_rest_lands() {
    let text = format!(
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n\
         DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 87\n\
         DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION{{{GPU0}}} ERROR - FAILED TO CONVERT TO STRING\n\
         DCGM_FI_DEV_FB_USED{{{GPU0}}} 40960\n"
    );
    let (sink, stats) = run(&text);
    let bad_line = text.lines().nth(2).unwrap();
    assert_eq!(
        sink.rejections,
        vec![Rejection::new(
            3,
            "DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION",
            "value 'ERROR - FAILED TO CONVERT TO STRING' is not a number",
            bad_line
        )]
    );
    assert_eq!(
        stats,
        DcgmStats {
            lines: 4,
            samples: 2,
            rows_wide: 1,
            rows_extra: 0,
            sentinels_dropped: 0,
            rejected: 1
        }
    );
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(floats(&rows, "gpu_util"), vec![Some(87.0)]);
    assert_eq!(floats(&rows, "fb_used_mib"), vec![Some(40960.0)]);
}

#[test]
fn malformed_lines_are_rejected_with_line_field_and_reason() {
    let text = format!(
        "DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 1\n\
         DCGM_FI_DEV_SM_CLOCK{{gpu=\"0\",UUID=\"GPU-aaaa\" 10\n\
         DCGM_FI_DEV_SM_CLOCK{{gpu=0}} 10\n\
         DCGM_FI_DEV_SM_CLOCK{{{GPU0}}}\n\
         DCGM_FI_DEV_SM_CLOCK{{{GPU0}}} 10 soon\n\
         DCGM_FI_DEV_SM_CLOCK{{{GPU0}}} 10 1767261600000 extra\n\
         {{gpu=\"0\"}} 10\n\
         DCGM_FI_DEV_GPU_UTIL{{gpu=\"zero\",UUID=\"GPU-aaaa\"}} 5\n\
         DCGM_FI_DEV_FB_USED{{gpu=\"zero\",UUID=\"GPU-aaaa\"}} 5\n\
         DCGM_FI_DEV_SM_CLOCK{{{GPU0}}} 1410\n"
    );
    let (sink, stats) = run(&text);
    let found: Vec<_> = sink
        .rejections
        .iter()
        .map(|r| (r.line, r.field.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![
            (2, "labels", "expected ',' or '}' after label 'UUID'"),
            (3, "gpu", "label value is not in double quotes"),
            (4, "DCGM_FI_DEV_SM_CLOCK", "sample has no value"),
            (
                5,
                "timestamp",
                "'soon' is not a timestamp (integer milliseconds since the epoch)"
            ),
            (
                6,
                "DCGM_FI_DEV_SM_CLOCK",
                "unexpected text after the timestamp: 'extra'"
            ),
            (
                7,
                "metric",
                "line is not 'metric_name{labels} value [timestamp]'"
            ),
            (8, "gpu", "'zero' is not an integer gpu_index"),
            (9, "gpu", "'zero' is not an integer gpu_index"),
        ]
    );
    assert_eq!(stats.rejected, 8);
    assert_eq!(stats.samples, 2);
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(floats(&rows, "gpu_util"), vec![Some(1.0)]);
    assert_eq!(floats(&rows, "sm_clock_mhz"), vec![Some(1410.0)]);
}

#[test]
fn input_that_is_not_prometheus_text_is_a_format_error() {
    for text in [
        "BillingAccountId,BilledCost\n1,2\n",
        "{\"ts\":\"2026-01-01T00:00:00Z\"}\n",
    ] {
        let mut sink = CollectSink::default();
        let error = parse(&mut text.as_bytes(), &context(), &mut sink).unwrap_err();
        let IngestError::Format { origin, reason } = &error else {
            panic!("{error}")
        };
        assert_eq!(origin, "test.prom");
        assert!(
            reason.starts_with("not Prometheus text exposition"),
            "{reason}"
        );
        assert!(reason.contains("line 1"), "{reason}");
    }
}

#[test]
fn lowercase_hostname_is_the_node_like_hostname() {
    let text = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-aaaa\",hostname=\"node-b\"} 5\n\
                DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-bbbb\",Hostname=\"node-b\",hostname=\"node-b\"} 6\n\
                DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",UUID=\"GPU-cccc\",Hostname=\"node-b\",hostname=\"node-c\"} 7\n";
    let (sink, stats) = run(text);
    assert_eq!(stats.rows_wide, 2);
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(strings(&rows, "node"), vec![Some("node-b".into()); 2]);
    assert_eq!(strings(&rows, "labels"), vec![None, None]);
    let found: Vec<_> = sink
        .rejections
        .iter()
        .map(|r| (r.line, r.field.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![(
            3,
            "hostname",
            "'node-c' contradicts another label for node ('node-b')"
        )]
    );
}

#[test]
fn escaped_label_values_are_unescaped() {
    // A `}` and a `,` inside quoted values must not end the label set or the pair.
    let labels = r#"gpu="0",UUID="GPU-aaaa",pod="a\"b\\c\nd",container="x}y",team="r&d, \"core\"",note="\t""#;
    let text = format!("DCGM_FI_DEV_GPU_UTIL{{{labels}}} 5\nDCGM_FI_DEV_FB_USED{{{labels}}} 512\n");
    let (sink, stats) = run(&text);
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats.rows_wide, 1);
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(strings(&rows, "pod"), one("a\"b\\c\nd"));
    assert_eq!(strings(&rows, "container"), one("x}y"));
    // Unknown escapes stay as written, as in Prometheus.
    assert_eq!(
        strings(&rows, "labels"),
        one(r#"{"note":"\\t","team":"r&d, \"core\""}"#)
    );
    assert_eq!(floats(&rows, "gpu_util"), vec![Some(5.0)]);
    assert_eq!(floats(&rows, "fb_used_mib"), vec![Some(512.0)]);
}

#[test]
fn per_sample_timestamps_give_a_row_per_scrape() {
    let mut text = String::new();
    for (scrape, ms) in [(0, 1_767_261_600_000_i64), (1, 1_767_261_615_000)] {
        text += &format!("DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} {} {ms}\n", 10 + scrape);
        text += &format!("DCGM_FI_DEV_GPU_UTIL{{{GPU1}}} {} {ms}\n", 20 + scrape);
        text += &format!("DCGM_FI_DEV_FB_USED{{{GPU0}}} {} {ms}\n", 100 + scrape);
        text += &format!("DCGM_FI_DEV_FB_USED{{{GPU1}}} {} {ms}\n", 200 + scrape);
    }
    let (sink, stats) = run(&text);
    assert_eq!(stats, self::stats(8, 8, 4, 0));
    let rows = sink.table(Table::GpuSamples);
    // 2026-01-01T10:00:00Z and 15 s later, in µs.
    let t0 = 1_767_261_600_000_000;
    assert_eq!(times(&rows), vec![t0, t0, t0 + 15_000_000, t0 + 15_000_000]);
    assert_eq!(
        ints(&rows, "gpu_index"),
        vec![Some(0), Some(1), Some(0), Some(1)]
    );
    assert_eq!(
        floats(&rows, "gpu_util"),
        vec![Some(10.0), Some(20.0), Some(11.0), Some(21.0)]
    );
    assert_eq!(
        floats(&rows, "fb_used_mib"),
        vec![Some(100.0), Some(200.0), Some(101.0), Some(201.0)]
    );
}

#[test]
fn openmetrics_total_suffix_seconds_exemplars_and_eof() {
    let text = format!(
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
         DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total{{{GPU0}}} 4742776 1767261600.250\n\
         DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_created{{{GPU0}}} 1767000000.0 1767261600.250\n\
         DCGM_FI_DEV_POWER_USAGE{{{GPU0}}} 71.5 1767261600.250 # {{trace_id=\"y\"}} 0.5\n\
         DCGM_EXP_XID_ERRORS_COUNT_total{{{GPU0},err_code=\"79\"}} 2 1767261600.250 # {{trace_id=\"x\"}} 1.0\n\
         # EOF\n\
         DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 99\n"
    );
    let (sink, stats) = run(&text);
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(6, 4, 1, 2));
    let ts = 1_767_261_600_250_000;
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(times(&rows), vec![ts]);
    assert_eq!(floats(&rows, "energy_mj"), vec![Some(4_742_776.0)]);
    assert_eq!(floats(&rows, "power_w"), vec![Some(71.5)]);
    assert_eq!(floats(&rows, "gpu_util"), vec![None]);
    let extra = sink.table(Table::GpuSamplesExtra);
    assert_eq!(times(&extra), vec![ts, ts]);
    assert_eq!(
        strings(&extra, "metric"),
        vec![
            Some("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_created".into()),
            Some("DCGM_EXP_XID_ERRORS_COUNT_total".into())
        ]
    );
    assert_eq!(
        floats(&extra, "value"),
        vec![Some(1_767_000_000.0), Some(2.0)]
    );
    assert_eq!(
        strings(&extra, "gpu_uuid"),
        vec![Some("GPU-aaaa".into()); 2]
    );
    assert_eq!(
        strings(&extra, "labels")[1].as_deref(),
        Some(
            r#"{"DCGM_FI_DRIVER_VERSION":"550.54.15","err_code":"79","modelName":"NVIDIA H100 80GB HBM3","pci_bus_id":"00000000:1A:00.0"}"#
        )
    );
}

#[test]
fn target_labels_fill_in_what_a_series_lacks_and_never_override_it() {
    let text = "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-aaaa\",Hostname=\"n1\"} 0.5\n\
                DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\",UUID=\"GPU-bbbb\",Hostname=\"n1\",rack=\"r7\",cluster=\"eu-1\"} 0.25\n";
    let mut ctx = context();
    ctx.labels = vec![
        ("cluster".into(), "lab".into()),
        ("rack".into(), "r1".into()),
    ];
    let (sink, _) = run_with(text, &ctx);
    let rows = sink.table(Table::GpuSamples);
    // A `cluster` target label fills the identity column; the second series names its own.
    assert_eq!(
        strings(&rows, "cluster"),
        vec![Some("lab".into()), Some("eu-1".into())]
    );
    assert_eq!(
        strings(&rows, "labels"),
        vec![
            Some(r#"{"rack":"r1"}"#.into()),
            Some(r#"{"rack":"r7"}"#.into())
        ]
    );
}

#[test]
fn unknown_labels_go_to_the_labels_json_and_identity_labels_to_columns() {
    let text = "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-aaaa\",device=\"nvidia0\",Hostname=\"n1\",\
                namespace=\"llm\",pod=\"vllm-0\",container=\"vllm\",pod_uid=\"\",hpc_job=\"\",\
                app_kubernetes_io_name=\"vllm\",dra_claim_name=\"gpu-claim\",cluster=\"eu-1\"} 0.5\n\
                DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\",uuid=\"GPU-bbbb\",hostname=\"n1\",pod_namespace=\"batch\",\
                pod_name=\"etl-7\",container_name=\"etl\",vgpu=\"1\",hpc_job=\"4242\"} 0.25\n";
    let (sink, stats) = run(text);
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(2, 2, 2, 0));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(
        strings(&rows, "cluster"),
        vec![Some("eu-1".into()), Some("default".into())]
    );
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        vec![Some("GPU-aaaa".into()), Some("GPU-bbbb".into())]
    );
    assert_eq!(
        strings(&rows, "namespace"),
        vec![Some("llm".into()), Some("batch".into())]
    );
    assert_eq!(
        strings(&rows, "pod"),
        vec![Some("vllm-0".into()), Some("etl-7".into())]
    );
    assert_eq!(
        strings(&rows, "container"),
        vec![Some("vllm".into()), Some("etl".into())]
    );
    assert_eq!(strings(&rows, "vgpu"), vec![None, Some("1".into())]);
    assert_eq!(strings(&rows, "hpc_job"), vec![None, Some("4242".into())]);
    assert_eq!(
        strings(&rows, "labels"),
        vec![
            Some(r#"{"app_kubernetes_io_name":"vllm","dra_claim_name":"gpu-claim"}"#.into()),
            None
        ]
    );
    assert_eq!(floats(&rows, "sm_active"), vec![Some(0.5), Some(0.25)]);
}

#[test]
fn unknown_metrics_and_series_without_a_gpu_go_long() {
    let text = format!(
        "DCGM_EXP_GPU_HEALTH_STATUS{{{GPU0},GPU_I_ID=\"3\",GPU_I_PROFILE=\"3g.40gb\"}} 0\n\
         DCGM_FI_DEV_POWER_USAGE{{Hostname=\"node-a\"}} 300.5\n\
         up 1\n\
         DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 42\n"
    );
    let (sink, stats) = run(&text);
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(4, 4, 1, 3));
    let extra = sink.table(Table::GpuSamplesExtra);
    assert_eq!(
        strings(&extra, "metric"),
        vec![
            Some("DCGM_EXP_GPU_HEALTH_STATUS".into()),
            Some("DCGM_FI_DEV_POWER_USAGE".into()),
            Some("up".into())
        ]
    );
    assert_eq!(
        floats(&extra, "value"),
        vec![Some(0.0), Some(300.5), Some(1.0)]
    );
    assert_eq!(strings(&extra, "cluster"), vec![Some("default".into()); 3]);
    assert_eq!(
        strings(&extra, "node"),
        vec![Some("node-a".into()), Some("node-a".into()), None]
    );
    assert_eq!(
        strings(&extra, "gpu_uuid"),
        vec![Some("GPU-aaaa".into()), None, None]
    );
    assert_eq!(ints(&extra, "gpu_index"), vec![Some(0), None, None]);
    assert_eq!(ints(&extra, "mig_instance"), vec![Some(3), None, None]);
    assert_eq!(
        strings(&extra, "labels"),
        vec![
            Some(
                r#"{"DCGM_FI_DRIVER_VERSION":"550.54.15","GPU_I_PROFILE":"3g.40gb","modelName":"NVIDIA H100 80GB HBM3","pci_bus_id":"00000000:1A:00.0"}"#
                    .into()
            ),
            None,
            None
        ]
    );
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(floats(&rows, "gpu_util"), vec![Some(42.0)]);
}

#[test]
fn a_second_sample_of_a_metric_at_the_same_time_is_a_duplicate() {
    let reordered = r#"UUID="GPU-aaaa",gpu="0",device="nvidia0",pci_bus_id="00000000:1A:00.0",Hostname="node-a",modelName="NVIDIA H100 80GB HBM3",DCGM_FI_DRIVER_VERSION="550.54.15""#;
    let text = format!(
        "DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 10\n\
         DCGM_FI_DEV_GPU_UTIL{{{reordered}}} 11\n\
         DCGM_EXP_XID_ERRORS_COUNT{{{GPU0}}} 1\n\
         DCGM_EXP_XID_ERRORS_COUNT{{{GPU0}}} 1\n\
         DCGM_FI_DEV_FB_USED{{{reordered}}} 64\n"
    );
    let (sink, stats) = run(&text);
    let found: Vec<_> = sink
        .rejections
        .iter()
        .map(|r| (r.line, r.field.as_str(), r.reason.as_str()))
        .collect();
    let reason =
        "duplicate sample: the series already has a value of this metric at this timestamp";
    assert_eq!(
        found,
        vec![
            (2, "DCGM_FI_DEV_GPU_UTIL", reason),
            (4, "DCGM_EXP_XID_ERRORS_COUNT", reason)
        ]
    );
    assert_eq!(
        stats,
        DcgmStats {
            lines: 5,
            samples: 3,
            rows_wide: 1,
            rows_extra: 1,
            sentinels_dropped: 0,
            rejected: 2
        }
    );
    // The same labels in another order are the same series: one row.
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(floats(&rows, "gpu_util"), vec![Some(10.0)]);
    assert_eq!(floats(&rows, "fb_used_mib"), vec![Some(64.0)]);
}

#[test]
fn abbreviated_label_sets_must_match_exactly_one_series() {
    let text = format!(
        "DCGM_FI_DEV_SM_CLOCK{{{GPU0}}} 210\n\
         DCGM_FI_DEV_SM_CLOCK{{{GPU1}}} 210\n\
         DCGM_FI_DEV_MEM_CLOCK{{...,modelName=\"NVIDIA H100 80GB HBM3\",...}} 405\n\
         DCGM_FI_DEV_MEM_CLOCK{{gpu=\"1\",...}} 405\n\
         DCGM_FI_DEV_MEM_CLOCK{{gpu=\"7\",...}} 405\n"
    );
    let (sink, stats) = run(&text);
    let found: Vec<_> = sink
        .rejections
        .iter()
        .map(|r| (r.line, r.field.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![
            (
                3,
                "labels",
                "abbreviated label set ('...') matches several series seen before it"
            ),
            (
                5,
                "labels",
                "abbreviated label set ('...') matches no series seen before it"
            ),
        ]
    );
    assert_eq!(stats.rows_wide, 2);
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(floats(&rows, "mem_clock_mhz"), vec![None, Some(405.0)]);
}

/// Three 15-second scrapes of two GPUs: two known metrics and one unknown per GPU.
fn three_scrapes() -> String {
    let mut text = String::new();
    for scrape in 0..3 {
        let ms = 1_767_261_600_000_i64 + scrape * 15_000;
        for metric in [
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_FB_USED",
            "DCGM_EXP_XID_ERRORS_COUNT",
        ] {
            for labels in [GPU0, GPU1] {
                text += &format!("{metric}{{{labels}}} {scrape} {ms}\n");
            }
        }
    }
    text
}

fn batch_sizes(sink: &CollectSink) -> Vec<(Table, usize)> {
    sink.batches
        .iter()
        .map(|(table, batch)| (*table, batch.num_rows()))
        .collect()
}

#[test]
fn batches_are_emitted_as_rows_complete() {
    let mut ctx = context();
    ctx.batch_rows = 2;
    let (sink, stats) = run_with(&three_scrapes(), &ctx);
    assert_eq!(stats, self::stats(18, 18, 6, 6));
    // Extra rows go as soon as two are read; wide rows once the next scrape begins.
    let (wide, extra) = (Table::GpuSamples, Table::GpuSamplesExtra);
    assert_eq!(
        batch_sizes(&sink),
        vec![
            (extra, 2),
            (wide, 2),
            (extra, 2),
            (wide, 2),
            (extra, 2),
            (wide, 2)
        ]
    );
    let rows = sink.table(wide);
    assert_eq!(
        floats(&rows, "fb_used_mib"),
        vec![
            Some(0.0),
            Some(0.0),
            Some(1.0),
            Some(1.0),
            Some(2.0),
            Some(2.0)
        ]
    );

    ctx.batch_rows = 4;
    let (sink, _) = run_with(&three_scrapes(), &ctx);
    assert_eq!(
        batch_sizes(&sink),
        vec![(extra, 4), (wide, 4), (wide, 2), (extra, 2)]
    );
    let rows = sink.table(wide);
    assert_eq!(
        floats(&rows, "gpu_util"),
        vec![
            Some(0.0),
            Some(0.0),
            Some(1.0),
            Some(1.0),
            Some(2.0),
            Some(2.0)
        ]
    );
}

#[test]
fn an_untimestamped_scrape_is_split_only_at_the_end() {
    let mut text = String::new();
    for metric in ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"] {
        for gpu in 0..5 {
            text += &format!("{metric}{{gpu=\"{gpu}\",UUID=\"GPU-{gpu}\"}} {gpu}\n");
        }
    }
    let mut ctx = context();
    ctx.batch_rows = 3;
    let (sink, stats) = run_with(&text, &ctx);
    assert_eq!(stats, self::stats(10, 10, 5, 0));
    assert_eq!(
        batch_sizes(&sink),
        vec![(Table::GpuSamples, 3), (Table::GpuSamples, 2)]
    );
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(values_per_row(&rows), vec![2; 5]);
    assert_eq!(times(&rows), vec![at().timestamp_micros(); 5]);
}

#[test]
fn the_fast_number_path_agrees_with_the_standard_parser() {
    let mut written: Vec<String> = [
        "0",
        "-0",
        "7",
        "0.995630",
        "16.365000",
        "15152422938",
        "123456789012345",
        "1234567890123456",
        "0.000000000000001",
        "+3.5",
        "-12.25",
        "1.",
        ".5",
        "9007199254740993",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    written.extend((1..2000).map(|i| format!("{:.6}", f64::from(i) / 7.0)));
    written.extend((1..2000).map(|i| format!("{}", i64::from(i) * 7_919_993)));
    for text in &written {
        let expected: f64 = text.parse().unwrap();
        let parsed = parse_value(text.as_bytes()).unwrap();
        assert_eq!(parsed.to_bits(), expected.to_bits(), "{text}");
    }
    assert_eq!(parse_value(b"1e3"), Some(1000.0));
    assert_eq!(parse_value(b"+Inf"), Some(f64::INFINITY));
    assert!(parse_value(b"NaN").unwrap().is_nan());
    for bad in ["", "-", ".", "1.2.3", "12a", "ERROR"] {
        assert_eq!(parse_value(bad.as_bytes()), None, "{bad}");
    }
}

#[test]
fn timestamps_are_milliseconds_or_openmetrics_seconds() {
    assert_eq!(
        parse_timestamp(b"1767261600000"),
        Some(1_767_261_600_000_000)
    );
    assert_eq!(
        parse_timestamp(b"1767261600.250"),
        Some(1_767_261_600_250_000)
    );
    assert_eq!(parse_timestamp(b"-5"), Some(-5000));
    assert_eq!(parse_timestamp(b"99999999999999999"), None);
    assert_eq!(parse_timestamp(b"12a"), None);
    assert_eq!(parse_timestamp(b"NaN"), None);
}

#[test]
fn a_byte_order_mark_crlf_line_ends_and_extra_blanks_are_accepted() {
    let text = format!(
        "\u{feff}# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\r\n\
         DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 64\r\n\
         \t DCGM_FI_DEV_FB_USED {{{GPU0}}}  1024 \t 1767261600000  \r\n"
    );
    let (sink, stats) = run(&text);
    assert!(sink.rejections.is_empty(), "{:?}", sink.rejections);
    assert_eq!(stats, self::stats(3, 2, 2, 0));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(
        times(&rows),
        vec![at().timestamp_micros(), 1_767_261_600_000_000]
    );
    assert_eq!(floats(&rows, "gpu_util"), vec![Some(64.0), None]);
    assert_eq!(floats(&rows, "fb_used_mib"), vec![None, Some(1024.0)]);
}

#[test]
fn lines_split_across_reads_parse_the_same() {
    let Some(path) = shared_data("cncf-k8s-ai-conformance/dcgm-exporter-kops-aws-L4.prom") else {
        return;
    };
    let text = std::fs::read(path).unwrap();
    // The last line without its line break, read through a buffer far smaller than a line.
    let text = text.strip_suffix(b"\n").unwrap();
    let (whole, whole_stats) = run(std::str::from_utf8(text).unwrap());
    let mut sink = CollectSink::default();
    let mut reader = std::io::BufReader::with_capacity(16, text);
    let stats = parse(&mut reader, &context(), &mut sink).unwrap();
    assert_eq!(stats, whole_stats);
    assert_eq!(stats.samples, 23);
    assert_eq!(
        sink.table(Table::GpuSamples),
        whole.table(Table::GpuSamples)
    );
    assert_eq!(
        floats(&sink.table(Table::GpuSamples), "pcie_rx_bytes_per_s"),
        vec![Some(17544.0)]
    );
}
