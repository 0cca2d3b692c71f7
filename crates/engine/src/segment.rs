//! A segment: a fixed-size buffer that items are appended to, in one queue.

use tiercache_policy::Queue;

pub struct Segment {
    pub data: Box<[u8]>,
    /// Bytes written so far (next item's offset).
    pub write: usize,
    /// Items written here that are still linked in the index.
    pub live_items: u32,
    pub queue: Queue,
}

impl Segment {
    pub fn new(data: Box<[u8]>, queue: Queue) -> Segment {
        Segment {
            data,
            write: 0,
            live_items: 0,
            queue,
        }
    }

    pub fn room(&self) -> usize {
        self.data.len() - self.write
    }
}
