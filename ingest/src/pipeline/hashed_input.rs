//! The decompressed input as a parser reads it, hashed as it is read.
//!
//! An input's identity is a hash of every byte after gunzip ([`InputHasher`]), and hashing is
//! as costly as parsing: for dcgm text (~300 bytes a sample) SHA-256 was ~40 % of the parsing
//! thread's time, with the writer's core mostly idle. So the input is read in chunks that the
//! parser and a hashing thread share. An input of up to [`INLINE_BYTES`] (a request body, a
//! scrape) is hashed inline and starts no thread, however many reads it arrives in: a thread
//! costs more than hashing it. Past that, an input (a file, a stream, anything gzipped) is
//! hashed on a thread of its own while the parser goes on. The chunks are few and reused, so
//! memory stays at [`CHUNKS_IN_FLIGHT`] chunks whatever the input's size, and a slow hasher
//! holds the parser back rather than letting chunks pile up.

use std::io::{BufRead, ErrorKind, Read};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use gpuledger_lake::catalog::InputHash;
use sha2::{Digest, Sha256};

/// The hash of an input's bytes, by the algorithm its catalog identifies inputs with: BLAKE3,
/// about twice as fast as SHA-256 on this kind of machine, in a catalog created since; SHA-256
/// in one that held inputs before.
#[derive(Clone)]
pub(super) enum InputHasher {
    Sha256(Sha256),
    Blake3(Box<blake3::Hasher>),
}

impl InputHasher {
    pub(super) fn new(algorithm: InputHash) -> Self {
        match algorithm {
            InputHash::Sha256 => Self::Sha256(Sha256::new()),
            InputHash::Blake3 => Self::Blake3(Box::default()),
        }
    }

    pub(super) fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(hasher) => hasher.update(bytes),
            Self::Blake3(hasher) => {
                hasher.update(bytes);
            }
        }
    }

    pub(super) fn finalize(self) -> [u8; 32] {
        match self {
            Self::Sha256(hasher) => hasher.finalize().into(),
            Self::Blake3(hasher) => hasher.finalize().into(),
        }
    }

    /// The hash of `bytes` alone, by the same algorithm.
    #[cfg(test)]
    pub(super) fn digest(algorithm: InputHash, bytes: &[u8]) -> [u8; 32] {
        let mut hasher = Self::new(algorithm);
        hasher.update(bytes);
        hasher.finalize()
    }
}

/// Chunks allocated for one input at most: the one being read or parsed, one being hashed, one
/// waiting for the hasher.
const CHUNKS_IN_FLIGHT: usize = 3;

/// The bytes an input is hashed inline for: ~0.3 ms of BLAKE3 (0.7 of SHA-256), about what
/// parsing them takes, against a thread started and handed chunks for every input.
const INLINE_BYTES: u64 = 1 << 20;

pub(super) struct HashedInput<R> {
    inner: R,
    chunk_size: usize,
    /// The chunk being parsed: `chunk[position..filled]` is still unread.
    chunk: Arc<Vec<u8>>,
    filled: usize,
    position: usize,
    bytes_read: u64,
    /// Hashed inline until more than this is read.
    inline_up_to: u64,
    hashing: Hashing,
}

enum Hashing {
    /// On the reading thread, until the input proves longer than its `inline_up_to`.
    Inline(InputHasher),
    /// On a thread of its own, which hands each chunk back once hashed.
    Threaded {
        chunks: SyncSender<(Arc<Vec<u8>>, usize)>,
        hashed: Receiver<Arc<Vec<u8>>>,
        allocated: usize,
        hasher: JoinHandle<InputHasher>,
    },
}

impl<R: Read> HashedInput<R> {
    pub(super) fn new(inner: R, chunk_size: usize, hasher: InputHasher) -> Self {
        Self {
            inner,
            chunk_size: chunk_size.max(1),
            chunk: Arc::default(),
            filled: 0,
            position: 0,
            bytes_read: 0,
            inline_up_to: INLINE_BYTES,
            hashing: Hashing::Inline(hasher),
        }
    }

    /// Hashed inline up to `bytes` instead of [`INLINE_BYTES`], to test the thread on short inputs.
    #[cfg(test)]
    fn inline_up_to(mut self, bytes: u64) -> Self {
        self.inline_up_to = bytes;
        self
    }

    /// The hash of every byte read. The caller reads to the end first: what a parser left
    /// unread is part of the content too.
    pub(super) fn finish(self) -> std::io::Result<[u8; 32]> {
        match self.hashing {
            Hashing::Inline(hasher) => Ok(hasher.finalize()),
            Hashing::Threaded { chunks, hasher, .. } => {
                drop(chunks);
                let hasher = hasher.join().map_err(|_| hasher_stopped())?;
                Ok(hasher.finalize())
            }
        }
    }

    /// Reads the next chunk and hashes it. A chunk is what one read gives, as with a
    /// `BufReader`: the parser sees bytes as they arrive (a trickling body, a pipe); an empty
    /// chunk is the end.
    fn next_chunk(&mut self) -> std::io::Result<()> {
        let mut buffer = self.empty_buffer()?;
        let filled = loop {
            match self.inner.read(&mut buffer) {
                Ok(n) => break n,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => {
                    // The buffer stays this input's, for a read after the error.
                    self.chunk = Arc::new(buffer);
                    (self.filled, self.position) = (0, 0);
                    return Err(error);
                }
            }
        };
        let inline_until_now = self.bytes_read <= self.inline_up_to;
        self.bytes_read += filled as u64;
        // Once, as the input passes its inline bytes: if no thread can be had then, it stays
        // inline rather than trying again with every chunk.
        if inline_until_now
            && self.bytes_read > self.inline_up_to
            && let Hashing::Inline(hasher) = &self.hashing
            && let Some(threaded) = start_hasher(hasher)
        {
            self.hashing = threaded;
        }
        let chunk = Arc::new(buffer);
        match &mut self.hashing {
            Hashing::Inline(hasher) => hasher.update(&chunk[..filled]),
            Hashing::Threaded { chunks, .. } if filled > 0 => chunks
                .send((Arc::clone(&chunk), filled))
                .map_err(|_| hasher_stopped())?,
            Hashing::Threaded { .. } => {}
        }
        self.chunk = chunk;
        (self.filled, self.position) = (filled, 0);
        Ok(())
    }

    /// A chunk to read into: the one just parsed when the hasher does not hold it (always so
    /// inline; when threaded, the empty chunk at the end or one a failed read left), else one
    /// the hasher handed back, or a new one while fewer than [`CHUNKS_IN_FLIGHT`] exist.
    fn empty_buffer(&mut self) -> std::io::Result<Vec<u8>> {
        if let Ok(buffer) = Arc::try_unwrap(std::mem::take(&mut self.chunk))
            && buffer.len() == self.chunk_size
        {
            return Ok(buffer);
        }
        let Hashing::Threaded {
            hashed, allocated, ..
        } = &mut self.hashing
        else {
            return Ok(vec![0; self.chunk_size]);
        };
        let returned = if *allocated < CHUNKS_IN_FLIGHT {
            hashed.try_recv().ok()
        } else {
            Some(hashed.recv().map_err(|_| hasher_stopped())?)
        };
        // Once handed back by the hasher and let go of by the parser (above), a chunk has one
        // owner.
        match returned.and_then(|chunk| Arc::try_unwrap(chunk).ok()) {
            Some(buffer) => Ok(buffer),
            None => {
                *allocated += 1;
                Ok(vec![0; self.chunk_size])
            }
        }
    }
}

/// Hashing on a thread of its own, carrying on from `inline`; `None` if no thread can be had.
fn start_hasher(inline: &InputHasher) -> Option<Hashing> {
    let (chunks, to_hash) = sync_channel::<(Arc<Vec<u8>>, usize)>(CHUNKS_IN_FLIGHT);
    let (give_back, hashed) = channel();
    let mut threaded = inline.clone();
    let hasher = std::thread::Builder::new()
        .name("gpuledger-hash".into())
        .spawn(move || {
            for (chunk, filled) in to_hash {
                threaded.update(&chunk[..filled]);
                // The reader may have finished and gone: then nobody needs the chunk back.
                let _ = give_back.send(chunk);
            }
            threaded
        });
    match hasher {
        Ok(hasher) => Some(Hashing::Threaded {
            chunks,
            hashed,
            // The chunk being read, in the first chunk's buffer (reused while inline).
            allocated: 1,
            hasher,
        }),
        Err(error) => {
            tracing::warn!(%error, "no thread to hash an input on: hashing it inline");
            None
        }
    }
}

fn hasher_stopped() -> std::io::Error {
    std::io::Error::other("the thread hashing the input stopped")
}

impl<R: Read> Read for HashedInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for HashedInput<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.position == self.filled {
            self.next_chunk()?;
        }
        Ok(&self.chunk[self.position..self.filled])
    }

    fn consume(&mut self, amount: usize) {
        self.position = (self.position + amount).min(self.filled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `data` a few bytes at a time, with an interruption now and then, as a socket or a
    /// gzip stream may.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        reads: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            if self.reads.is_multiple_of(5) {
                return Err(ErrorKind::Interrupted.into());
            }
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn input(lines: usize) -> Vec<u8> {
        (0..lines)
            .map(|i| {
                format!(
                    "DCGM_FI_DEV_GPU_UTIL{{gpu=\"{i}\"}} {} 1767261600000\n",
                    i * 7
                )
            })
            .collect::<String>()
            .into_bytes()
    }

    /// Every way through: lines read one by one (a parser), then the rest copied (what it left
    /// unread), over chunks smaller than a line, of a line, and larger than the input.
    #[test]
    fn every_byte_is_read_once_in_order_and_hashed_as_a_whole() {
        let data = input(120);
        for algorithm in [InputHash::Sha256, InputHash::Blake3] {
            every_byte_is_read_once_in_order_and_hashed_by(algorithm, &data);
        }
        // The algorithms are the standard ones, as other tools compute them.
        assert_eq!(
            hex::encode(InputHasher::digest(InputHash::Sha256, b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex::encode(InputHasher::digest(InputHash::Blake3, b"abc")),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
    }

    fn every_byte_is_read_once_in_order_and_hashed_by(algorithm: InputHash, data: &[u8]) {
        let expected = InputHasher::digest(algorithm, data);
        for chunk_size in [1, 7, 64, 4096, data.len(), data.len() + 1, 1 << 20] {
            for step in [1, 13, 1 << 16] {
                for parsed_lines in [0, 3, 120] {
                    // A thread from the first byte, from the 1,001st, and the default: a body
                    // read in many small reads (a request's frames) still hashed inline.
                    for inline_up_to in [0, 1000, INLINE_BYTES] {
                        let mut hashed = HashedInput::new(
                            Trickle {
                                data,
                                step,
                                reads: 0,
                            },
                            chunk_size,
                            InputHasher::new(algorithm),
                        )
                        .inline_up_to(inline_up_to);
                        let mut seen = Vec::new();
                        for _ in 0..parsed_lines {
                            hashed.read_until(b'\n', &mut seen).unwrap();
                        }
                        std::io::copy(&mut hashed, &mut seen).unwrap();
                        let case = format!(
                            "chunk {chunk_size}, step {step}, {parsed_lines} lines parsed, \
                             inline up to {inline_up_to}"
                        );
                        assert_eq!(seen, data, "{case}");
                        let threaded = matches!(hashed.hashing, Hashing::Threaded { .. });
                        assert_eq!(threaded, data.len() as u64 > inline_up_to, "{case}");
                        assert_eq!(hashed.finish().unwrap(), expected, "{case}");
                    }
                }
            }
        }
    }

    /// However long the input, the chunks allocated stay at `CHUNKS_IN_FLIGHT`.
    #[test]
    fn a_long_input_reuses_its_chunks() {
        let data = input(20_000);
        let mut hashed =
            HashedInput::new(&data[..], 256, InputHasher::new(InputHash::Blake3)).inline_up_to(256);
        std::io::copy(&mut hashed, &mut std::io::sink()).unwrap();
        let Hashing::Threaded { allocated, .. } = &hashed.hashing else {
            panic!("an input of many chunks is hashed on a thread");
        };
        assert!(*allocated <= CHUNKS_IN_FLIGHT, "{allocated} chunks");
        assert_eq!(hashed.bytes_read, data.len() as u64);
        assert_eq!(
            hashed.finish().unwrap(),
            InputHasher::digest(InputHash::Blake3, &data)
        );
    }

    /// Reads after the end, and reads that fail, leave no chunk behind: however many there are,
    /// the input keeps its chunks and its hash (before, every read at the end lost one, and the
    /// fourth waited for ever for the hasher to hand one back).
    #[test]
    fn reads_at_the_end_and_failed_reads_lose_no_chunk() {
        struct FailsEveryOther<'a> {
            data: &'a [u8],
            calls: usize,
        }
        impl Read for FailsEveryOther<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.calls += 1;
                if self.calls.is_multiple_of(2) {
                    return Err(std::io::Error::other("flaky"));
                }
                let n = 3.min(buf.len()).min(self.data.len());
                buf[..n].copy_from_slice(&self.data[..n]);
                self.data = &self.data[n..];
                Ok(n)
            }
        }
        let data = input(40);
        let mut hashed = HashedInput::new(
            FailsEveryOther {
                data: &data,
                calls: 0,
            },
            16,
            InputHasher::new(InputHash::Blake3),
        )
        .inline_up_to(16);
        let mut seen = Vec::new();
        let mut failures = 0;
        loop {
            match hashed.fill_buf() {
                Ok([]) => break,
                Ok(bytes) => {
                    let n = bytes.len();
                    seen.extend_from_slice(bytes);
                    hashed.consume(n);
                }
                Err(error) => {
                    assert_eq!(error.to_string(), "flaky");
                    failures += 1;
                }
            }
        }
        assert!(failures > 100, "{failures} failed reads");
        // The reader goes on failing every other read at the end too.
        let mut ends = 0;
        while ends < 10 {
            if let Ok(bytes) = hashed.fill_buf() {
                assert!(bytes.is_empty());
                ends += 1;
            }
        }
        assert_eq!(seen, data);
        let Hashing::Threaded { allocated, .. } = &hashed.hashing else {
            panic!("an input of many chunks is hashed on a thread");
        };
        assert!(*allocated <= CHUNKS_IN_FLIGHT, "{allocated} chunks");
        assert_eq!(
            hashed.finish().unwrap(),
            InputHasher::digest(InputHash::Blake3, &data)
        );
    }

    #[test]
    fn an_empty_input_hashes_as_nothing() {
        for algorithm in [InputHash::Sha256, InputHash::Blake3] {
            let mut hashed = HashedInput::new(&b""[..], 8, InputHasher::new(algorithm));
            assert!(hashed.fill_buf().unwrap().is_empty());
            assert_eq!(
                hashed.finish().unwrap(),
                InputHasher::digest(algorithm, b"")
            );
        }
    }

    /// A read failing after some bytes hands those bytes over first, then the error.
    #[test]
    fn a_failing_read_gives_what_came_before_it_then_the_error() {
        /// Fails once after `before` bytes, then would go on with `after` more.
        struct FailsOnce {
            before: usize,
            failed: bool,
        }
        impl Read for FailsOnce {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.before == 0 && !self.failed {
                    self.failed = true;
                    return Err(std::io::Error::other("connection reset"));
                }
                let n = if self.failed {
                    buf.len()
                } else {
                    self.before.min(buf.len()).min(3)
                };
                buf[..n].fill(if self.failed { b'y' } else { b'x' });
                self.before = self.before.saturating_sub(n);
                Ok(n)
            }
        }
        for chunk_size in [4, 5, 10, 64] {
            let mut hashed = HashedInput::new(
                FailsOnce {
                    before: 10,
                    failed: false,
                },
                chunk_size,
                InputHasher::new(InputHash::Blake3),
            );
            let mut seen = Vec::new();
            let error = std::io::copy(&mut hashed, &mut seen).unwrap_err();
            assert_eq!(error.to_string(), "connection reset", "chunk {chunk_size}");
            assert_eq!(seen, b"xxxxxxxxxx", "chunk {chunk_size}");
        }
    }
}
