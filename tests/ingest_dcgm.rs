//! dcgm-exporter scrapes through the real binary.

use serde_json::json;

use crate::support::{describe, ledgers, shared};

const SCRAPES: [&str; 7] = [
    "cncf-k8s-ai-conformance/dcgm-exporter-ericsson-T4.prom",
    "cncf-k8s-ai-conformance/dcgm-exporter-kops-aws-L4.prom",
    "cncf-k8s-ai-conformance/dcgm-exporter-upcloud-L40S.prom",
    "cncf-k8s-ai-conformance/dcgm-exporter-viettel-L40S.prom",
    "cncf-k8s-ai-conformance/dcgm-exporter-vks-GRID-A100-10C-vgpu.prom",
    "cncf-k8s-ai-conformance/dcgm-exporter-vks-GRID-A100-40C-vgpu.prom",
    "nvidia-cloud-native-docs/dcgm-exporter-a100-mig-sample.prom",
];

#[test]
fn every_real_scrape_lands_with_its_gpus() {
    let Some(paths) = SCRAPES
        .iter()
        .map(|s| shared(s))
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    for ledger in ledgers() {
        for path in &paths {
            let out = ledger.run(&[
                "ingest",
                "dcgm",
                path.to_str().unwrap(),
                "--at",
                "2026-11-02T10:00:00Z",
                "--cluster",
                "lab",
            ]);
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                describe(&out)
            );
        }
        // The seven files hold eight distinct GPUs (shared/data/README.md).
        assert_eq!(
            ledger.scalar("select count(distinct gpu_uuid) from gpu_samples"),
            8
        );
        let l4 = ledger.sql(
            "select node, gpu_model, gpu_index, sm_clock_mhz, cluster, cast(ts as varchar) as ts from gpu_samples \
             where gpu_uuid = 'GPU-c2f76b33-7953-256e-8f33-1343419b1a1c'",
        );
        assert_eq!(
            l4,
            [
                json!({"node": "i-030791dc5a37cd257", "gpu_model": "NVIDIA L4", "gpu_index": 0, "sm_clock_mhz": 210.0, "cluster": "lab", "ts": "2026-11-02T10:00:00Z"})
            ]
        );
        // The MIG scrape: the whole A100 and its 1g.5gb instance 13 are separate rows.
        let mig = ledger.sql(
            "select mig_profile, mig_instance, gr_engine_active from gpu_samples \
             where gpu_uuid = 'GPU-34319582-d595-d1c7-d1d2-179bcfa61660' order by mig_instance nulls first",
        );
        assert_eq!(mig.len(), 2, "{mig:?}");
        assert_eq!(mig[1]["mig_profile"], "1g.5gb");
        assert_eq!(mig[1]["mig_instance"], 13);
        assert_eq!(mig[1]["gr_engine_active"], 0.995687);
    }
}

#[test]
fn a_bad_line_is_quarantined_and_the_rest_lands() {
    for ledger in ledgers() {
        let scrape = "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n\
            DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"} 41\n\
            DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"} ERROR - FAILED TO CONVERT TO STRING\n\
            DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-1\",Hostname=\"n1\"} 71.5\n";
        let path = ledger.dir.path().join("bad.prom");
        std::fs::write(&path, scrape).unwrap();
        let out = ledger.run(&[
            "ingest",
            "dcgm",
            path.to_str().unwrap(),
            "--at",
            "2026-11-02T10:00:00Z",
        ]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "rejections exit 1: {}",
            describe(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("bad.prom:3: field 'DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION'"),
            "{stderr}"
        );
        let row = &ledger.sql("select gpu_temp_c, power_w from gpu_samples")[0];
        assert_eq!(
            (row["gpu_temp_c"].as_f64(), row["power_w"].as_f64()),
            (Some(41.0), Some(71.5))
        );
        let quarantined = ledger.sql("select file, line, field, source from quarantine");
        assert_eq!(quarantined.len(), 1);
        assert_eq!(quarantined[0]["line"], 3);
        assert_eq!(quarantined[0]["source"], "dcgm");
        assert!(
            quarantined[0]["file"]
                .as_str()
                .unwrap()
                .ends_with("bad.prom")
        );

        // --strict: the same input lands nothing at all.
        let strict = ledger.dir.path().join("bad-strict.prom");
        std::fs::write(&strict, scrape.replace("41", "42")).unwrap();
        let out = ledger.run(&[
            "ingest",
            "dcgm",
            strict.to_str().unwrap(),
            "--strict",
            "--at",
            "2026-11-02T11:00:00Z",
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert_eq!(ledger.scalar("select count(*) from gpu_samples"), 1);
        assert_eq!(
            ledger.scalar("select count(*) from system.ingest_batches"),
            1
        );
    }
}
