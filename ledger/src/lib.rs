//! The money math of gpuledger. Pure functions over plain Rust values: no DataFusion, no I/O,
//! so its tests compile and run in seconds.
