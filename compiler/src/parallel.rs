//! Work spread over every core: tuning compiles many configs of one kernel, each on its
//! own (`tlc tune`, `tlc plan`'s ranking).

/// The threads [`for_each`] runs on: one per core.
pub fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f` on every item, on one thread per core, each taking the next item left.
pub fn for_each<T: Send>(items: &mut [T], f: impl Fn(&mut T) + Sync) {
    // Each worker takes the next item when it is done with one: the items' costs differ
    // (a tuning space's large configs take seconds of ptxas, small ones milliseconds), so
    // fixed chunks would leave workers idle behind the one holding the large items.
    let threads = workers().min(items.len());
    let next = std::sync::Mutex::new(items.iter_mut());
    let (f, next) = (&f, &next);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || loop {
                let item = match next.lock() {
                    Ok(mut it) => it.next(),
                    // A worker panicked holding the lock; the scope re-raises its panic.
                    Err(_) => None,
                };
                match item {
                    Some(item) => f(item),
                    None => break,
                }
            });
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
