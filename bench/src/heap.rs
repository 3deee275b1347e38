//! The guest's peak heap, measured on the native build: an allocator that counts the live
//! bytes the policy code holds, leaving out what the host does while it serves a call (the
//! reflector's clone and serialisation) but counting the response it hands over, which in wasm
//! is copied into a buffer the guest allocates. Native pointers are twice wasm32's, so this is
//! an upper bound of the wasm heap; linear memory adds the module's data and its 1 MiB stack.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use cozystack_capabilities_policy::host::Host;

pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Counting is on inside [`peak_of`], off while the host serves a call.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

fn add(bytes: usize) {
    let live = LIVE.fetch_add(bytes as isize, Ordering::Relaxed) + bytes as isize;
    PEAK.fetch_max(live.max(0) as usize, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            add(layout.size());
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counting() {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counting() {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
            add(new_size);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// A host whose own work is not counted; the response it returns is (the guest's copy).
pub struct Uncounted<'h>(pub &'h dyn Host);

impl Host for Uncounted<'_> {
    fn kubernetes(&self, operation: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        COUNTING.with(|c| c.set(false));
        let answer = self.0.kubernetes(operation, request);
        COUNTING.with(|c| c.set(true));
        match &answer {
            Ok(bytes) => add(bytes.capacity()),
            Err(text) => add(text.capacity()),
        }
        answer
    }
}

/// The peak of live guest bytes while `work` runs.
pub fn peak_of(work: impl FnOnce()) -> usize {
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    work();
    COUNTING.with(|c| c.set(false));
    PEAK.load(Ordering::Relaxed)
}
