//! SQL types nl2sql returns that pgrx has no Rust type for.

use pgrx::prelude::*;

/// A value of PostgreSQL's `bit` type: `len` bits, most significant first, in `bytes`.
pub struct Bits {
    pub bytes: Vec<u8>,
    pub len: i32,
}

impl Bits {
    pub fn from_words(words: &[u64]) -> Bits {
        Bits { bytes: words.iter().flat_map(|w| w.to_be_bytes()).collect(), len: (words.len() * 64) as i32 }
    }
}

impl IntoDatum for Bits {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        // The layout of VarBit: a 4-byte varlena header, the bit length, then the bits.
        let size = 8 + self.bytes.len();
        // SAFETY: a fresh palloc'd block of `size` bytes, filled in the VarBit layout.
        unsafe {
            let ptr = pg_sys::palloc0(size) as *mut u8;
            pgrx::set_varsize_4b(ptr.cast(), size as i32);
            ptr.add(4).cast::<i32>().write_unaligned(self.len);
            std::ptr::copy_nonoverlapping(self.bytes.as_ptr(), ptr.add(8), self.bytes.len());
            Some(pg_sys::Datum::from(ptr))
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::BITOID
    }
}

pgrx::impl_sql_translatable!(Bits, "bit");

// SAFETY: returns the datum built by into_datum, or NULL.
unsafe impl pgrx::callconv::BoxRet for Bits {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut pgrx::callconv::FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        match self.into_datum() {
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}
