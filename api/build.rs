//! Rebuilds the binary when a file of the dashboard (`web/`) changes or is added: the files are
//! embedded at compile time (`serve/web.rs`), which cargo cannot see by itself.
fn main() {
    println!("cargo:rerun-if-changed=../web");
}
