//! Work spread over every core: tuning compiles many configs of one kernel, each on its
//! own (`tlc tune`, `tlc plan`'s ranking).

/// The threads [`for_each`] runs on: one per core.
pub fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f` on every item, the items split into one contiguous chunk per core.
pub fn for_each<T: Send>(items: &mut [T], f: impl Fn(&mut T) + Sync) {
    let chunk = items.len().div_ceil(workers()).max(1);
    let f = &f;
    std::thread::scope(|s| {
        for part in items.chunks_mut(chunk) {
            s.spawn(move || part.iter_mut().for_each(f));
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_item_once() {
        let mut v: Vec<u64> = (0..1000).collect();
        super::for_each(&mut v, |x| *x *= 2);
        assert_eq!(v, (0..1000).map(|x| x * 2).collect::<Vec<_>>());
        let mut empty: Vec<u64> = Vec::new();
        super::for_each(&mut empty, |x| *x += 1);
    }
}
