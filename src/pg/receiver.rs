//! A DestReceiver that keeps a generated query's rows as text, within a row cap and a byte cap
//! enforced while rows arrive: the executor stops as soon as either is reached.

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;

/// What the receiver kept.
#[derive(Default)]
pub struct Collected {
    pub columns: Vec<(String, u32)>,
    pub rows: Vec<Vec<Option<String>>>,
    pub bytes: usize,
    /// More rows existed than the row cap allowed.
    pub row_cap: bool,
    /// The next row would have passed the byte cap.
    pub byte_cap: bool,
}

struct State {
    max_rows: usize,
    max_bytes: usize,
    outputs: Vec<(pg_sys::FmgrInfo, bool)>,
    out: Collected,
}

/// The DestReceiver PostgreSQL calls, with our state behind it.
#[repr(C)]
pub struct Receiver {
    base: pg_sys::DestReceiver,
    state: *mut State,
}

impl Receiver {
    /// A receiver keeping at most `max_rows` rows and `max_bytes` bytes of text.
    pub fn new(max_rows: usize, max_bytes: usize) -> Box<Receiver> {
        let state = Box::into_raw(Box::new(State { max_rows, max_bytes, outputs: vec![], out: Collected::default() }));
        Box::new(Receiver {
            base: pg_sys::DestReceiver {
                receiveSlot: Some(receive),
                rStartup: Some(startup),
                rShutdown: Some(noop),
                rDestroy: Some(noop),
                mydest: pg_sys::CommandDest::DestNone,
            },
            state,
        })
    }

    pub fn as_dest(&mut self) -> *mut pg_sys::DestReceiver {
        (self as *mut Receiver).cast()
    }

    /// What arrived.
    pub fn take(&mut self) -> Collected {
        // SAFETY: `state` was made by Box::into_raw in new() and is freed only in Drop.
        unsafe { std::mem::take(&mut (*self.state).out) }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // SAFETY: made by Box::into_raw in new(), freed once.
        unsafe { drop(Box::from_raw(self.state)) };
    }
}

unsafe fn state<'a>(dest: *mut pg_sys::DestReceiver) -> &'a mut State {
    &mut *(*(dest as *mut Receiver)).state
}

#[pg_guard]
unsafe extern "C-unwind" fn startup(dest: *mut pg_sys::DestReceiver, _op: i32, desc: pg_sys::TupleDesc) {
    let st = state(dest);
    st.outputs.clear();
    st.out.columns.clear();
    for i in 0..(*desc).natts as usize {
        let att = crate::pg::compat::attribute(desc, i);
        let name = CStr::from_ptr((*att).attname.data.as_ptr()).to_string_lossy().into_owned();
        let mut func = pg_sys::InvalidOid;
        let mut varlena = false;
        pg_sys::getTypeOutputInfo((*att).atttypid, &mut func, &mut varlena);
        let mut finfo: pg_sys::FmgrInfo = std::mem::zeroed();
        pg_sys::fmgr_info(func, &mut finfo);
        st.outputs.push((finfo, varlena));
        st.out.columns.push((name, (*att).atttypid.into()));
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn noop(_dest: *mut pg_sys::DestReceiver) {}

/// One row: its values as text, unless it would pass a cap (then the executor stops).
#[pg_guard]
unsafe extern "C-unwind" fn receive(slot: *mut pg_sys::TupleTableSlot, dest: *mut pg_sys::DestReceiver) -> bool {
    let st = state(dest);
    if st.out.rows.len() >= st.max_rows {
        st.out.row_cap = true;
        return false;
    }
    let natts = st.outputs.len();
    if ((*slot).tts_nvalid as usize) < natts {
        pg_sys::slot_getsomeattrs_int(slot, natts as i32);
    }
    let mut row = Vec::with_capacity(natts);
    let mut bytes = st.out.bytes;
    for i in 0..natts {
        if *(*slot).tts_isnull.add(i) {
            row.push(None);
            continue;
        }
        let datum = *(*slot).tts_values.add(i);
        let (finfo, varlena) = &mut st.outputs[i];
        // A huge value is refused before it is printed.
        if *varlena && bytes.saturating_add(pg_sys::toast_raw_datum_size(datum)) > st.max_bytes {
            st.out.byte_cap = true;
            return false;
        }
        let p = pg_sys::OutputFunctionCall(finfo, datum);
        let text = CStr::from_ptr(p).to_string_lossy().into_owned();
        pg_sys::pfree(p.cast());
        bytes = bytes.saturating_add(text.len());
        if bytes > st.max_bytes {
            st.out.byte_cap = true;
            return false;
        }
        row.push(Some(text));
    }
    st.out.bytes = bytes;
    st.out.rows.push(row);
    true
}
