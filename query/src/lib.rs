//! DataFusion over the lake.
