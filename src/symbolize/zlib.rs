//! zlib-compressed debug sections (`ELFCOMPRESS_ZLIB`), inflated by
//! zlib-rs.
//!
//! Inflating libc6-dbg's `.debug_info` (5.8 MB) was two thirds of the CPU
//! of a dump that symbolizes libc's frames. zlib-rs inflates it in about
//! 0.6x the instructions of miniz_oxide (flate2's default backend, which
//! stays the one `heaplive-format` compresses pprof files with: only the
//! inflater is linked from zlib-rs, not its deflater, whose panic locations
//! would add relocations to every process's start).
//!
//! The compressed bytes are read straight from the file mapping (no
//! intermediate buffer), through [`Consumed`], which gives back the pages
//! read past.

use std::io::Read;

use zlib_rs::{Inflate, InflateFlush, Status};

use super::sparse::Consumed;

/// zlib's window, as every zlib stream of a debug section uses at most.
const WINDOW_BITS: u8 = 15;

/// The whole of a zlib stream of `size` bytes once inflated, as `object`'s
/// `CompressedData::decompress` gives it: `None` when the stream is
/// corrupt or inflates to fewer than `size` bytes (its excess, if any, is
/// not read).
pub(super) fn whole(data: &[u8], size: u64) -> Option<Vec<u8>> {
    let size = usize::try_from(size).ok()?;
    let mut out = Vec::new();
    out.try_reserve_exact(size).ok()?;
    out.resize(size, 0);
    let mut z = Inflate::new(true, WINDOW_BITS);
    z.decompress(data, &mut out, InflateFlush::Finish).ok()?;
    (z.total_out() == size as u64).then_some(out)
}

/// A zlib stream read as it inflates.
pub(super) struct Stream<'i, 'a> {
    input: &'i Consumed<'a>,
    z: Inflate,
    ended: bool,
}

impl<'i, 'a> Stream<'i, 'a> {
    pub(super) fn new(input: &'i Consumed<'a>) -> Self {
        Stream {
            input,
            z: Inflate::new(true, WINDOW_BITS),
            ended: false,
        }
    }
}

impl Read for Stream<'_, '_> {
    /// Some bytes of the stream; 0 at its end. An error when it is
    /// corrupt or its input ends first.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let corrupt = || std::io::Error::from(std::io::ErrorKind::InvalidData);
        if self.ended || buf.is_empty() {
            return Ok(0);
        }
        loop {
            let (in0, out0) = (self.z.total_in(), self.z.total_out());
            let status = self
                .z
                .decompress(self.input.rest(), buf, InflateFlush::NoFlush)
                .map_err(|_| corrupt())?;
            let used = (self.z.total_in() - in0) as usize;
            let made = (self.z.total_out() - out0) as usize;
            self.input.advance(used);
            if status == Status::StreamEnd {
                self.ended = true;
                return Ok(made);
            }
            if made > 0 {
                return Ok(made);
            }
            if used == 0 {
                // No progress with all the input there is: it ended early.
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Bytes that compress, but not to nothing (DWARF-like repetition
    /// with variation), and their zlib stream (flate2, as objcopy's zlib
    /// would write it).
    fn sample() -> (Vec<u8>, Vec<u8>) {
        let plain: Vec<u8> = (0..700_000u32)
            .map(|i| ((i % 251) ^ (i / 4093) ^ (i.wrapping_mul(2_654_435_761) >> 29)) as u8)
            .collect();
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&plain).unwrap();
        (plain, e.finish().unwrap())
    }

    #[test]
    fn whole_inflates_exactly_the_size_asked() {
        let (plain, packed) = sample();
        assert!(packed.len() < plain.len() / 2, "{} bytes", packed.len());
        let size = plain.len() as u64;
        assert!(whole(&packed, size).unwrap() == plain);
        // Fewer bytes than the header says, a truncated or corrupt stream:
        // no data (object's decompress fails the same way).
        assert!(whole(&packed, size + 1).is_none());
        assert!(whole(&packed[..packed.len() / 2], size).is_none());
        let mut bad = packed.clone();
        bad[0] ^= 0xff; // not a zlib header
        assert!(whole(&bad, size).is_none());
        // A smaller size reads the stream's start only.
        assert!(whole(&packed, 1000).unwrap()[..] == plain[..1000]);
        assert_eq!(whole(&[], 0), Some(vec![]));
    }

    #[test]
    fn stream_inflates_in_any_read_sizes_and_consumes_its_input() {
        let (plain, packed) = sample();
        for chunk in [1usize, 7, 4096, 256 << 10, 1 << 20] {
            let input = Consumed::new(&packed);
            let mut s = Stream::new(&input);
            let mut out = Vec::new();
            let mut buf = vec![0u8; chunk];
            loop {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            assert!(out == plain, "chunk {chunk}: {} bytes", out.len());
            assert_eq!(input.rest().len(), 0, "chunk {chunk}");
        }
        // Input that ends early: an error, not a short stream taken whole.
        let cut = Consumed::new(&packed[..packed.len() / 3]);
        let mut out = Vec::new();
        assert!(Stream::new(&cut).read_to_end(&mut out).is_err());
        assert!(out.len() < plain.len());
    }
}
