//! Generated text as a [`std::io::Read`], produced a chunk at a time as the reader pulls it, so a
//! month of scrapes streams into the ingest pipeline in bounded memory.

use std::io::Read;

/// A producer of text in pieces (one scrape, one hour of requests).
pub trait Chunks {
    /// Appends the next piece to `buf`; `false` once there is nothing more.
    fn next_chunk(&mut self, buf: &mut Vec<u8>) -> bool;
}

/// Reads what a [`Chunks`] producer generates.
pub struct ChunkReader<C> {
    chunks: C,
    buf: Vec<u8>,
    pos: usize,
    done: bool,
}

impl<C: Chunks> ChunkReader<C> {
    pub fn new(chunks: C) -> Self {
        Self {
            chunks,
            buf: Vec::with_capacity(1 << 20),
            pos: 0,
            done: false,
        }
    }
}

impl<C: Chunks> Read for ChunkReader<C> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.buf.len() {
            if self.done {
                return Ok(0);
            }
            self.buf.clear();
            self.pos = 0;
            self.done = !self.chunks.next_chunk(&mut self.buf);
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Appends `x` with six decimals, as dcgm-exporter prints doubles (`%f`); `x` is not negative.
pub fn push_fixed6(buf: &mut Vec<u8>, x: f64) {
    let micros = (x.max(0.0) * 1e6).round() as u64;
    let mut digits = itoa::Buffer::new();
    buf.extend_from_slice(digits.format(micros / 1_000_000).as_bytes());
    buf.push(b'.');
    let fraction = digits.format(micros % 1_000_000 + 1_000_000).as_bytes();
    buf.extend_from_slice(&fraction[1..]);
}

/// Appends an integer.
pub fn push_int(buf: &mut Vec<u8>, x: impl itoa::Integer) {
    buf.extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
}
