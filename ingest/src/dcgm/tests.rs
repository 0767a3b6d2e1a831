use std::collections::BTreeSet;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int32Type, TimestampMicrosecondType};
use chrono::{DateTime, TimeZone, Utc};
use gpuledger_lake::tables::DCGM_FIELDS;

use super::lexer::{parse_timestamp, parse_value};
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

/// The counts of a parse, `untimestamped` left out: the tests that compare whole counts are about
/// what landed; `untimestamped_samples_are_counted` checks that count.
fn run_with(text: &str, ctx: &ParseContext) -> (CollectSink, DcgmStats) {
    let mut sink = CollectSink::default();
    let stats = parse(&mut text.as_bytes(), ctx, &mut sink).expect("parses");
    (
        sink,
        DcgmStats {
            untimestamped: 0,
            ..stats
        },
    )
}

#[test]
fn untimestamped_samples_are_counted() {
    let text = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-1\"} 41\n\
                DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\"} 70 1790000000000\n\
                DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-1\"} 12\n";
    let mut sink = CollectSink::default();
    let stats = parse(&mut text.as_bytes(), &context(), &mut sink).unwrap();
    assert_eq!((stats.samples, stats.untimestamped), (3, 2));
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
        untimestamped: 0,
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
    // Rows in the table's sort order: GPU 1's UUID sorts first.
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(ints(&rows, "gpu_index"), vec![Some(1), Some(0)]);
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        vec![
            Some("GPU-72ad4d20-cfed-f08d-c894-f620962ca3e4".into()),
            Some("GPU-a8affe7e-7930-ae20-3fc6-4b0edf3ebbf3".into())
        ]
    );
    assert_eq!(
        strings(&rows, "pci_bus_id"),
        vec![
            Some("00000000:B4:00.0".into()),
            Some("00000000:0D:00.0".into())
        ]
    );
    assert_eq!(strings(&rows, "node"), vec![Some("ubuntu-sv16".into()); 2]);
    assert_eq!(
        strings(&rows, "driver_version"),
        vec![Some("580.126.09".into()); 2]
    );
    assert_eq!(floats(&rows, "power_w"), vec![Some(34.164), Some(34.156)]);
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
fn dcgm_blank_sentinels_are_dropped_and_nan_is_rejected() {
    let text = format!(
        "DCGM_FI_DEV_MEMORY_TEMP{{{GPU0}}} 9223372036854775794\n\
         DCGM_FI_DEV_GPU_TEMP{{{GPU0}}} 2147483634\n\
         DCGM_FI_DEV_POWER_USAGE{{{GPU0}}} 140737488355330.000000\n\
         DCGM_FI_PROF_SM_ACTIVE{{{GPU0}}} NaN\n\
         DCGM_FI_DEV_SM_CLOCK{{{GPU0}}} 1980\n\
         DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU0}}} 2147483636\n"
    );
    let (sink, stats) = run(&text);
    // DCGM has no NaN reading: a NaN is quarantined at its line, not dropped as a blank.
    let rejected = sink.rejected();
    assert_eq!(
        rejected,
        [(
            4,
            "DCGM_FI_PROF_SM_ACTIVE",
            "NaN is not a reading (only finite values are)"
        )]
    );
    assert_eq!(
        stats,
        DcgmStats {
            lines: 6,
            samples: 2,
            rows_wide: 1,
            rows_extra: 0,
            sentinels_dropped: 3,
            rejected: 1,
            untimestamped: 0
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
    for blank in ["140737488355328", "140737488355331.000000"] {
        assert!(is_blank(parse_value(blank.as_bytes()).unwrap()), "{blank}");
    }
    // Prometheus's staleness marker is a blank; a NaN as text writes it is not.
    assert!(is_blank(f64::from_bits(0x7ff0_0000_0000_0002)));
    for reading in [
        "NaN",
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
            rejected: 1,
            untimestamped: 0
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
    let found = sink.rejected();
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
    let found = sink.rejected();
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
    // 2026-01-01T10:00:00Z and 15 s later, in µs; rows in the table's sort order (GPU, then time).
    let t0 = 1_767_261_600_000_000;
    assert_eq!(times(&rows), vec![t0, t0 + 15_000_000, t0, t0 + 15_000_000]);
    assert_eq!(
        ints(&rows, "gpu_index"),
        vec![Some(0), Some(0), Some(1), Some(1)]
    );
    assert_eq!(
        floats(&rows, "gpu_util"),
        vec![Some(10.0), Some(11.0), Some(20.0), Some(21.0)]
    );
    assert_eq!(
        floats(&rows, "fb_used_mib"),
        vec![Some(100.0), Some(101.0), Some(200.0), Some(201.0)]
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
    // A `cluster` target label fills the identity column; the second series names its own (and
    // sorts first).
    assert_eq!(
        strings(&rows, "cluster"),
        vec![Some("eu-1".into()), Some("lab".into())]
    );
    assert_eq!(
        strings(&rows, "labels"),
        vec![
            Some(r#"{"rack":"r7"}"#.into()),
            Some(r#"{"rack":"r1"}"#.into())
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
    // Rows in the table's sort order: the default cluster sorts first.
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(
        strings(&rows, "cluster"),
        vec![Some("default".into()), Some("eu-1".into())]
    );
    assert_eq!(
        strings(&rows, "gpu_uuid"),
        vec![Some("GPU-bbbb".into()), Some("GPU-aaaa".into())]
    );
    assert_eq!(
        strings(&rows, "namespace"),
        vec![Some("batch".into()), Some("llm".into())]
    );
    assert_eq!(
        strings(&rows, "pod"),
        vec![Some("etl-7".into()), Some("vllm-0".into())]
    );
    assert_eq!(
        strings(&rows, "container"),
        vec![Some("etl".into()), Some("vllm".into())]
    );
    assert_eq!(strings(&rows, "vgpu"), vec![Some("1".into()), None]);
    assert_eq!(strings(&rows, "hpc_job"), vec![Some("4242".into()), None]);
    assert_eq!(
        strings(&rows, "labels"),
        vec![
            None,
            Some(r#"{"app_kubernetes_io_name":"vllm","dra_claim_name":"gpu-claim"}"#.into())
        ]
    );
    assert_eq!(floats(&rows, "sm_active"), vec![Some(0.25), Some(0.5)]);
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
    let found = sink.rejected();
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
            rejected: 2,
            untimestamped: 0
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
    let found = sink.rejected();
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
fn a_batch_size_past_what_the_parser_holds_is_taken_as_its_largest() {
    // Twice usize::MAX rows once overflowed (a panic, or a batch of 0 rows in release).
    for batch_rows in [usize::MAX, usize::MAX / 2 + 1, MAX_BATCH_ROWS + 1] {
        let mut ctx = context();
        ctx.limits.batch_rows = batch_rows;
        let (sink, stats) = run_with(&three_scrapes(), &ctx);
        assert_eq!(stats, self::stats(18, 18, 6, 6), "{batch_rows}");
        // All three scrapes in one batch per table, as with any batch larger than the input.
        let (wide, extra) = (Table::GpuSamples, Table::GpuSamplesExtra);
        assert_eq!(
            batch_sizes(&sink),
            vec![(wide, 6), (extra, 6)],
            "{batch_rows}"
        );
    }
}

#[test]
fn batches_are_emitted_as_rows_complete() {
    let mut ctx = context();
    ctx.limits.batch_rows = 2;
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

    ctx.limits.batch_rows = 4;
    let (sink, _) = run_with(&three_scrapes(), &ctx);
    assert_eq!(
        batch_sizes(&sink),
        vec![(extra, 4), (wide, 4), (wide, 2), (extra, 2)]
    );
    // Each batch in the table's sort order: the first holds both GPUs at two times.
    let rows = sink.table(wide);
    assert_eq!(
        floats(&rows, "gpu_util"),
        vec![
            Some(0.0),
            Some(1.0),
            Some(0.0),
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
    ctx.limits.batch_rows = 3;
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
    .map(std::string::ToString::to_string)
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
    // In time order: the timestamped sample is older than the untimestamped one's `at`.
    assert_eq!(
        times(&rows),
        vec![1_767_261_600_000_000, at().timestamp_micros()]
    );
    assert_eq!(floats(&rows, "gpu_util"), vec![None, Some(64.0)]);
    assert_eq!(floats(&rows, "fb_used_mib"), vec![Some(1024.0), None]);
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
    // The sample file has no timestamps: every sample is read at the context's `at`.
    assert_eq!(stats.untimestamped, 23);
    assert_eq!(
        DcgmStats {
            untimestamped: 0,
            ..stats
        },
        whole_stats
    );
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

// ---- input order ----

/// The three scrapes of `fleet`, 30 s apart (2026-01-01T10:00:00Z on), in ms.
pub(crate) const FLEET_MS: [i64; 3] = [1_767_261_600_000, 1_767_261_630_000, 1_767_261_660_000];

/// One metric family of one series over the three scrapes: a remote-write time series.
pub(crate) struct FleetSeries {
    pub labels: Vec<(&'static str, &'static str)>,
    pub metric: &'static str,
    pub values: [&'static str; 3],
}

const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
const XID: &str = "DCGM_FI_DEV_XID_ERRORS";
const GR: &str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
const SM: &str = "DCGM_FI_PROF_SM_ACTIVE";
/// The order dcgm-exporter prints the families of `fleet` in.
const FLEET_FAMILIES: [&str; 5] = [UTIL, POWER, XID, GR, SM];

/// 2 nodes × 2 GPUs; GPU 1 of n2 is split into two 3g.40gb MIG instances, each with its pod
/// (the GPU itself reports power and XID, the instances their activity). Six series, listed in
/// no sorted order, 63 samples: 3 plain GPUs × 5 families × 3 scrapes, the MIG GPU 2 × 3, its
/// instances 2 × 2 × 3.
pub(crate) fn fleet() -> Vec<FleetSeries> {
    let gpu = |node: &'static str, index: &'static str, uuid: &'static str| {
        vec![
            ("gpu", index),
            ("UUID", uuid),
            ("device", if index == "0" { "nvidia0" } else { "nvidia1" }),
            ("modelName", "NVIDIA A100-SXM4-80GB"),
            ("Hostname", node),
        ]
    };
    let instance = |id: &'static str, pod: &'static str| {
        let mut labels = gpu("n2", "1", "GPU-2b");
        labels.extend([
            ("GPU_I_PROFILE", "3g.40gb"),
            ("GPU_I_ID", id),
            ("namespace", "ml"),
            ("pod", pod),
        ]);
        labels
    };
    let plain = [
        (
            gpu("n2", "0", "GPU-2a"),
            [
                ["99", "98", "0"],
                ["650.000000", "640.000000", "60.000000"],
                ["0", "0", "79"],
                ["0.950000", "0.940000", "0.000000"],
                ["0.900000", "0.890000", "0.000000"],
            ],
        ),
        (
            gpu("n1", "1", "GPU-1b"),
            [
                ["14", "14", "15"],
                ["75.250000", "75.500000", "75.750000"],
                ["0", "0", "0"],
                ["0.030000", "0.030000", "0.040000"],
                ["0.020000", "0.020000", "0.030000"],
            ],
        ),
        (
            gpu("n1", "0", "GPU-1a"),
            [
                ["70", "72", "74"],
                ["300.500000", "301.500000", "302.500000"],
                ["0", "0", "0"],
                ["0.600000", "0.620000", "0.640000"],
                ["0.500000", "0.520000", "0.540000"],
            ],
        ),
    ];
    let mut fleet = Vec::new();
    for (labels, values) in plain {
        for (metric, values) in FLEET_FAMILIES.into_iter().zip(values) {
            fleet.push(FleetSeries {
                labels: labels.clone(),
                metric,
                values,
            });
        }
    }
    let mig_gpu = gpu("n2", "1", "GPU-2b");
    fleet.push(FleetSeries {
        labels: mig_gpu.clone(),
        metric: POWER,
        values: ["400.000000", "401.000000", "402.000000"],
    });
    fleet.push(FleetSeries {
        labels: mig_gpu,
        metric: XID,
        values: ["0", "0", "0"],
    });
    for (labels, gr, sm) in [
        (
            instance("2", "infer-1"),
            ["0.010000", "0.010000", "0.010000"],
            ["0.000000", "0.000000", "0.000000"],
        ),
        (
            instance("1", "train-0"),
            ["0.750000", "0.760000", "0.770000"],
            ["0.700000", "0.710000", "0.720000"],
        ),
    ] {
        fleet.push(FleetSeries {
            labels: labels.clone(),
            metric: GR,
            values: gr,
        });
        fleet.push(FleetSeries {
            labels,
            metric: SM,
            values: sm,
        });
    }
    fleet
}

fn fleet_line(series: &FleetSeries, scrape: usize) -> String {
    let labels: Vec<String> = series
        .labels
        .iter()
        .map(|(name, value)| format!("{name}=\"{value}\""))
        .collect();
    format!(
        "{}{{{}}} {} {}\n",
        series.metric,
        labels.join(","),
        series.values[scrape],
        FLEET_MS[scrape]
    )
}

/// One exposition per scrape, each family once in it.
pub(crate) fn fleet_scrape_grouped() -> String {
    let fleet = fleet();
    let mut text = String::new();
    for scrape in 0..FLEET_MS.len() {
        for family in FLEET_FAMILIES {
            text += &format!("# TYPE {family} gauge\n");
            for series in fleet.iter().filter(|s| s.metric == family) {
                text += &fleet_line(series, scrape);
            }
        }
    }
    text
}

/// Each family once, with every scrape's samples.
fn fleet_family_grouped() -> String {
    let fleet = fleet();
    let mut text = String::new();
    for family in FLEET_FAMILIES {
        text += &format!("# TYPE {family} gauge\n");
        for scrape in 0..FLEET_MS.len() {
            for series in fleet.iter().filter(|s| s.metric == family) {
                text += &fleet_line(series, scrape);
            }
        }
    }
    text
}

/// The sample lines of `text` in an order drawn from `seed` (Fisher–Yates).
fn shuffled(text: &str, seed: u64) -> String {
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    for i in (1..lines.len()).rev() {
        let j = (gpuledger_demo::noise::mix(seed ^ i as u64) % (i as u64 + 1)) as usize;
        lines.swap(i, j);
    }
    lines.iter().map(|line| format!("{line}\n")).collect()
}

pub(crate) fn fleet_context() -> ParseContext {
    let mut ctx = context();
    ctx.cluster = Some("lab".into());
    ctx
}

pub(crate) fn wide_batches(sink: &CollectSink) -> Vec<RecordBatch> {
    sink.batches
        .iter()
        .filter(|(table, _)| *table == Table::GpuSamples)
        .map(|(_, batch)| batch.clone())
        .collect()
}

/// The rows of `fleet`, worked out by hand: one per series and scrape (6 × 3), in the table's
/// sort order (node, GPU UUID, MIG instance, time), whatever order the samples came in.
pub(crate) fn assert_fleet_rows(rows: &RecordBatch) {
    assert_eq!(rows.num_rows(), 18);
    let t: Vec<i64> = FLEET_MS.iter().map(|ms| ms * 1000).collect();
    assert_eq!(times(rows), t.repeat(6));
    let each3 = |values: &[&str]| -> Vec<Option<String>> {
        values
            .iter()
            .flat_map(|v| std::iter::repeat_n((!v.is_empty()).then(|| v.to_string()), 3))
            .collect()
    };
    assert_eq!(strings(rows, "cluster"), each3(&["lab"; 6]));
    assert_eq!(
        strings(rows, "node"),
        each3(&["n1", "n1", "n2", "n2", "n2", "n2"])
    );
    assert_eq!(
        strings(rows, "gpu_uuid"),
        each3(&["GPU-1a", "GPU-1b", "GPU-2a", "GPU-2b", "GPU-2b", "GPU-2b"])
    );
    assert_eq!(
        ints(rows, "mig_instance"),
        [None, None, None, None, Some(1), Some(2)]
            .iter()
            .flat_map(|&v| [v; 3])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        strings(rows, "pod"),
        each3(&["", "", "", "", "train-0", "infer-1"])
    );
    let none = [None; 3];
    let column = |parts: [[Option<f64>; 3]; 6]| parts.concat();
    assert_eq!(
        floats(rows, "gpu_util"),
        column([
            [Some(70.0), Some(72.0), Some(74.0)],
            [Some(14.0), Some(14.0), Some(15.0)],
            [Some(99.0), Some(98.0), Some(0.0)],
            none,
            none,
            none,
        ])
    );
    assert_eq!(
        floats(rows, "power_w"),
        column([
            [Some(300.5), Some(301.5), Some(302.5)],
            [Some(75.25), Some(75.5), Some(75.75)],
            [Some(650.0), Some(640.0), Some(60.0)],
            [Some(400.0), Some(401.0), Some(402.0)],
            none,
            none,
        ])
    );
    assert_eq!(
        floats(rows, "xid_last"),
        column([
            [Some(0.0); 3],
            [Some(0.0); 3],
            [Some(0.0), Some(0.0), Some(79.0)],
            [Some(0.0); 3],
            none,
            none,
        ])
    );
    assert_eq!(
        floats(rows, "gr_engine_active"),
        column([
            [Some(0.6), Some(0.62), Some(0.64)],
            [Some(0.03), Some(0.03), Some(0.04)],
            [Some(0.95), Some(0.94), Some(0.0)],
            none,
            [Some(0.75), Some(0.76), Some(0.77)],
            [Some(0.01); 3],
        ])
    );
    assert_eq!(
        floats(rows, "sm_active"),
        column([
            [Some(0.5), Some(0.52), Some(0.54)],
            [Some(0.02), Some(0.02), Some(0.03)],
            [Some(0.9), Some(0.89), Some(0.0)],
            none,
            [Some(0.7), Some(0.71), Some(0.72)],
            [Some(0.0); 3],
        ])
    );
    // 9 × 5 + 9 × 2 = 63 cells: every sample once.
    assert_eq!(values_per_row(rows), [vec![5; 9], vec![2; 9]].concat());
}

#[test]
fn the_same_samples_in_any_order_land_the_same_rows() {
    let ctx = fleet_context();
    let (scrape, stats) = run_with(&fleet_scrape_grouped(), &ctx);
    assert!(scrape.rejections.is_empty(), "{:?}", scrape.rejections);
    assert_eq!(
        (stats.samples, stats.rows_wide, stats.rows_extra),
        (63, 18, 0)
    );
    let expected = wide_batches(&scrape);
    assert_eq!(expected.len(), 1);
    assert_fleet_rows(&expected[0]);
    let family = fleet_family_grouped();
    for (shape, text) in [
        ("family-grouped", family.clone()),
        ("shuffled", shuffled(&family, 14)),
        ("shuffled again", shuffled(&family, 1_767_261_600)),
    ] {
        let (sink, stats) = run_with(&text, &ctx);
        assert!(sink.rejections.is_empty(), "{shape}: {:?}", sink.rejections);
        assert_eq!((stats.samples, stats.rows_wide), (63, 18), "{shape}");
        assert_eq!(wide_batches(&sink), expected, "{shape}");
    }
}

#[test]
fn a_tiny_batch_size_loses_and_repeats_no_sample() {
    let mut ctx = fleet_context();
    ctx.limits.batch_rows = 4;
    for (shape, text) in [
        ("scrape-grouped", fleet_scrape_grouped()),
        ("family-grouped", fleet_family_grouped()),
        ("shuffled", shuffled(&fleet_scrape_grouped(), 7)),
    ] {
        let (sink, stats) = run_with(&text, &ctx);
        assert!(sink.rejections.is_empty(), "{shape}: {:?}", sink.rejections);
        let batches = wide_batches(&sink);
        assert!(batches.iter().all(|b| b.num_rows() <= 4), "{shape}");
        assert_eq!(stats.rows_wide as usize, sink.rows(Table::GpuSamples));
        // Every (series, time, field) cell exactly once: 63 cells over 18 (series, time) keys,
        // in as many rows as the batches split them into.
        let mut cells = BTreeSet::new();
        let mut keys = BTreeSet::new();
        for batch in &batches {
            let (uuid, mig, ts) = (
                strings(batch, "gpu_uuid"),
                ints(batch, "mig_instance"),
                times(batch),
            );
            for row in 0..batch.num_rows() {
                let key = (uuid[row].clone(), mig[row], ts[row]);
                keys.insert(key.clone());
                for (_, column) in DCGM_FIELDS {
                    if batch.column_by_name(column).unwrap().is_valid(row) {
                        assert!(
                            cells.insert((key.clone(), *column)),
                            "{shape}: {key:?} {column}"
                        );
                    }
                }
            }
        }
        assert_eq!((cells.len(), keys.len()), (63, 18), "{shape}");
    }
    // Scrape by scrape, a scrape's rows are complete before the next one starts: 6 rows per
    // scrape do not fit in 4, so each scrape is emitted alone, in batches of 4 and 2.
    let (sink, _) = run_with(&fleet_scrape_grouped(), &ctx);
    let sizes: Vec<usize> = wide_batches(&sink)
        .iter()
        .map(arrow::array::RecordBatch::num_rows)
        .collect();
    assert_eq!(sizes, [4, 2, 4, 2, 4, 2]);
}

#[test]
fn a_duplicate_is_rejected_whatever_comes_between() {
    let text = format!(
        "DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 10 1767261600000\n\
         DCGM_EXP_XID_ERRORS_COUNT{{{GPU0}}} 1 1767261600000\n\
         DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 11 1767261615000\n\
         DCGM_EXP_XID_ERRORS_COUNT{{{GPU0}}} 1 1767261615000\n\
         DCGM_FI_DEV_GPU_UTIL{{{GPU1}}} 20 1767261600000\n\
         DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 12 1767261600000\n\
         DCGM_EXP_XID_ERRORS_COUNT{{{GPU0}}} 2 1767261600000\n"
    );
    let (sink, stats) = run(&text);
    let reason =
        "duplicate sample: the series already has a value of this metric at this timestamp";
    let found = sink.rejected();
    assert_eq!(
        found,
        [
            (6, "DCGM_FI_DEV_GPU_UTIL", reason),
            (7, "DCGM_EXP_XID_ERRORS_COUNT", reason)
        ]
    );
    assert_eq!(
        (stats.samples, stats.rows_wide, stats.rows_extra),
        (5, 3, 2)
    );
    // The first value stays.
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(
        floats(&rows, "gpu_util"),
        [Some(10.0), Some(11.0), Some(20.0)]
    );
}

#[test]
fn spellings_of_one_series_fill_one_row() {
    // Exporters before and after 2026 name the node label `Hostname` and `hostname`; the device
    // label is dropped: the same columns, so the same row.
    let lower = GPU0.replace("Hostname", "hostname");
    let bare = GPU0.replace("device=\"nvidia0\",", "");
    let text = format!(
        "DCGM_FI_DEV_GPU_UTIL{{{GPU0}}} 10\n\
         DCGM_FI_DEV_FB_USED{{{lower}}} 64\n\
         DCGM_FI_DEV_POWER_USAGE{{{bare}}} 71.5\n\
         DCGM_FI_DEV_GPU_UTIL{{{lower}}} 11\n"
    );
    let (sink, stats) = run(&text);
    assert_eq!(sink.rejections.len(), 1, "{:?}", sink.rejections);
    assert_eq!(sink.rejections[0].line, 4);
    assert_eq!((stats.samples, stats.rows_wide), (3, 1));
    let rows = sink.table(Table::GpuSamples);
    assert_eq!(values_per_row(&rows), [3]);
}

mod any_order {
    use proptest::prelude::*;

    use super::*;

    /// A small fleet: `nodes` × `gpus` series, each reporting the families of `families` (a bit
    /// per `FLEET_FAMILIES` entry) at `scrapes` times, with the value `values[i]` for its i-th line.
    fn scrape_set(
        nodes: usize,
        gpus: usize,
        families: u8,
        scrapes: usize,
        values: &[u16],
    ) -> String {
        let mut text = String::new();
        let mut values = values.iter().cycle();
        for scrape in 0..scrapes {
            let ms = 1_767_261_600_000 + 15_000 * scrape as i64;
            for (bit, family) in FLEET_FAMILIES.iter().enumerate() {
                if families & (1 << bit) == 0 {
                    continue;
                }
                for node in 0..nodes {
                    for gpu in 0..gpus {
                        let value = values.next().unwrap();
                        text += &format!(
                            "{family}{{gpu=\"{gpu}\",UUID=\"GPU-{node}-{gpu}\",Hostname=\"n{node}\"}} {value} {ms}\n"
                        );
                    }
                }
            }
        }
        text
    }

    fn permuted_scrape_sets() -> impl Strategy<Value = (String, Vec<String>)> {
        (
            1..=3usize,
            1..=3usize,
            1..32u8,
            1..=4usize,
            prop::collection::vec(any::<u16>(), 1..64),
        )
            .prop_flat_map(|(nodes, gpus, families, scrapes, values)| {
                let text = scrape_set(nodes, gpus, families, scrapes, &values);
                let lines: Vec<String> = text.lines().map(str::to_owned).collect();
                (Just(text), Just(lines).prop_shuffle())
            })
    }

    proptest! {
        #[test]
        fn any_permutation_of_the_lines_lands_the_same_rows((text, lines) in permuted_scrape_sets()) {
            let ctx = context();
            let (expected, _) = run_with(&text, &ctx);
            let (sink, stats) = run_with(&(lines.join("\n") + "\n"), &ctx);
            prop_assert!(sink.rejections.is_empty());
            prop_assert_eq!(stats.samples as usize, lines.len());
            prop_assert_eq!(wide_batches(&sink), wide_batches(&expected));
        }
    }
}

/// Readings no GPU reports are quarantined with their line and field, never dropped or landed.
#[test]
fn impossible_readings_are_rejected_with_their_field() {
    let series = "{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"}";
    let lines = [
        format!("DCGM_FI_DEV_GPU_TEMP{series} 41 1790000000000"),
        format!("DCGM_FI_DEV_POWER_USAGE{series} +Inf 1790000000000"),
        format!("DCGM_FI_DEV_FB_USED{series} -Inf 1790000000000"),
        // DCGM has no NaN reading (a blank field is left out): rejected like infinities.
        format!("DCGM_FI_DEV_GPU_UTIL{series} NaN 1790000000000"),
        format!("DCGM_FI_PROF_SM_ACTIVE{series} -0.5 1790000000000"),
        format!("DCGM_FI_DEV_SM_CLOCK{series} 1e300 1790000000000"),
        "DCGM_FI_DEV_MEM_CLOCK{gpu=\"-7\",UUID=\"GPU-2\"} 1 1790000000000".to_string(),
        format!("DCGM_FI_DEV_MEMORY_TEMP{series} 40 -1000"),
        format!("DCGM_FI_DEV_ENC_UTIL{series} 0 253402300800000"),
        // An unknown metric may be negative; an int64 blank is still a blank.
        format!("DCGM_FI_CUSTOM_OFFSET{series} -3 1790000000000"),
        format!("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{series} 9223372036854775794 1790000000000"),
    ];
    let (sink, stats) = run(&(lines.join("\n") + "\n"));
    let got = sink.rejected();
    assert_eq!(
        got,
        vec![
            (
                2,
                "DCGM_FI_DEV_POWER_USAGE",
                "+Inf is not a reading (only finite values are)"
            ),
            (
                3,
                "DCGM_FI_DEV_FB_USED",
                "-Inf is not a reading (only finite values are)"
            ),
            (
                4,
                "DCGM_FI_DEV_GPU_UTIL",
                "NaN is not a reading (only finite values are)"
            ),
            (
                5,
                "DCGM_FI_PROF_SM_ACTIVE",
                "-0.5 is negative: sm_active cannot be"
            ),
            (
                6,
                "DCGM_FI_DEV_SM_CLOCK",
                "1e300 is out of range for a DCGM field (at most 2^63 in magnitude)"
            ),
            (
                7,
                "gpu",
                "'-7' is negative: gpu_index is a device index (0 or more)"
            ),
            (
                8,
                "timestamp",
                "-1000 ms since the epoch is outside 1970-01-01 to 9999-12-31"
            ),
            (
                9,
                "timestamp",
                "253402300800000 ms since the epoch is outside 1970-01-01 to 9999-12-31"
            ),
        ]
    );
    assert_eq!(
        (stats.samples, stats.rejected, stats.sentinels_dropped),
        (2, 8, 1)
    );
}

// ---- label sets learned across inputs ----

/// `run_with`, resolving label sets through `learned` rather than the process's.
fn run_learning(
    text: &str,
    ctx: &ParseContext,
    learned: &Arc<LearnedSeries>,
) -> (CollectSink, DcgmStats) {
    let mut parser = Parser::learning(ctx, Arc::clone(learned));
    let mut sink = CollectSink::default();
    for_each_line(&mut text.as_bytes(), &ctx.origin, |line| {
        parser.line(line, &mut sink)
    })
    .expect("reads");
    let stats = parser.finish(&mut sink).expect("parses");
    (sink, stats)
}

/// What an input lands as, with every label set resolved afresh (nothing learned before).
fn run_afresh(text: &str, ctx: &ParseContext) -> (CollectSink, DcgmStats) {
    run_learning(text, ctx, &Arc::new(LearnedSeries::new(1 << 20)))
}

fn landed(sink: &CollectSink) -> (Vec<(Table, RecordBatch)>, Vec<(u64, &str, &str)>) {
    (sink.batches.clone(), sink.rejected())
}

/// A service resolves each label text once, and later inputs land exactly what they would have
/// landed with nothing learned: in the same context, in another (another default cluster, other
/// target labels), and past the bound, where it starts again.
#[test]
fn label_sets_learned_by_one_input_serve_the_next_without_changing_what_lands() {
    let learned = Arc::new(LearnedSeries::new(1 << 20));
    let mut other = fleet_context();
    other.cluster = Some("other".into());
    other.labels = vec![("namespace".into(), "team-a".into())];
    for text in [three_scrapes(), fleet_scrape_grouped()] {
        let texts: BTreeSet<&str> = text
            .lines()
            .filter_map(|line| Some(line.split_once('{')?.1.rsplit_once('}')?.0))
            .collect();
        let before = learned.len();
        let (first, first_stats) = run_learning(&text, &fleet_context(), &learned);
        assert_eq!(learned.len(), before + texts.len());
        let (again, again_stats) = run_learning(&text, &fleet_context(), &learned);
        assert_eq!(learned.len(), before + texts.len(), "nothing new to learn");
        let (afresh, afresh_stats) = run_afresh(&text, &fleet_context());
        assert_eq!(landed(&again), landed(&afresh));
        assert_eq!(landed(&first), landed(&afresh));
        assert_eq!((first_stats, again_stats), (afresh_stats, afresh_stats));

        // Another context learns the same texts anew, and lands what it would alone.
        let (elsewhere, _) = run_learning(&text, &other, &learned);
        assert_eq!(learned.len(), before + 2 * texts.len());
        assert_eq!(landed(&elsewhere), landed(&run_afresh(&text, &other).0));
        // The target label fills in the namespace of every series that lacks one.
        let namespaces = strings(&elsewhere.table(Table::GpuSamples), "namespace");
        assert!(namespaces.contains(&Some("team-a".into())));
        assert!(!namespaces.contains(&None));
    }
    // The fleet carries a cluster label on some series only: those without take the context's.
    let rows = run_learning(&fleet_scrape_grouped(), &other, &learned)
        .0
        .table(Table::GpuSamples);
    assert!(strings(&rows, "cluster").contains(&Some("other".into())));

    // Bounded: 4 KiB, four texts at most (each counts 1 KiB and more), so the fleet's label
    // sets keep starting again; what lands does not change.
    let small = Arc::new(LearnedSeries::new(4 << 10));
    for _ in 0..3 {
        let (sink, _) = run_learning(&fleet_scrape_grouped(), &fleet_context(), &small);
        assert!(small.len() <= 4);
        assert_eq!(
            landed(&sink),
            landed(&run_afresh(&fleet_scrape_grouped(), &fleet_context()).0)
        );
    }
}

/// What `...` stands for depends on the series met before it in the same input, so an
/// abbreviated label set is never learned for the next; nor are the label sets of remote-write,
/// which have no text (an unlabelled text line must not take a remote-write series' labels), nor
/// a label text longer than any exporter's (what is kept is bounded by memory, not count).
#[test]
fn abbreviated_textless_and_huge_label_sets_are_not_learned_for_later_inputs() {
    let learned = Arc::new(LearnedSeries::new(1 << 20));
    let full = format!(
        "DCGM_FI_DEV_SM_CLOCK{{{GPU0}}} 210\n\
         DCGM_FI_DEV_MEM_CLOCK{{gpu=\"0\",...}} 405\n"
    );
    let (sink, _) = run_learning(&full, &context(), &learned);
    assert!(sink.rejected().is_empty());
    assert_eq!(learned.len(), 1, "only the full label set");
    let alone = "DCGM_FI_DEV_MEM_CLOCK{gpu=\"0\",...} 405\n";
    let (sink, _) = run_learning(alone, &context(), &learned);
    assert_eq!(
        sink.rejected(),
        [(
            1,
            "labels",
            "abbreviated label set ('...') matches no series seen before it"
        )]
    );

    let ctx = context();
    let mut feed = SampleFeed {
        parser: Parser::learning(&ctx, Arc::clone(&learned)),
    };
    let labels = [
        ("gpu".to_string(), "3".to_string()),
        ("UUID".into(), "GPU-rw".into()),
    ];
    let mut sink = CollectSink::default();
    feed.push_series(
        1,
        "DCGM_FI_DEV_GPU_TEMP",
        &labels,
        [(40.0, 1_000)],
        &mut sink,
    )
    .unwrap();
    feed.finish(&mut sink).unwrap();
    assert_eq!(learned.len(), 1, "remote-write learns nothing");
    let (sink, _) = run_learning("DCGM_FI_DEV_GPU_TEMP 41 1000\n", &ctx, &learned);
    assert_eq!(learned.len(), 2, "the unlabelled text");
    // No GPU label: the reading goes long, without a GPU.
    assert_eq!(sink.table(Table::GpuSamples).num_rows(), 0);
    let extra = sink.table(Table::GpuSamplesExtra);
    assert_eq!(strings(&extra, "gpu_uuid"), [None]);

    let huge = format!(
        "DCGM_FI_DEV_GPU_TEMP{{gpu=\"0\",UUID=\"GPU-1\",pod=\"{}\"}} 41 1000\n",
        "p".repeat(5 << 10)
    );
    let (sink, _) = run_learning(&huge, &ctx, &learned);
    assert_eq!(learned.len(), 2, "not kept");
    let pods = strings(&sink.table(Table::GpuSamples), "pod");
    assert_eq!(pods[0].as_ref().map(String::len), Some(5 << 10));
}
