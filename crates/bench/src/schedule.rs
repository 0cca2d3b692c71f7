//! The open-loop arrival schedule. The run as a whole issues request `k` at
//! `k / rate` seconds after the start; request `k` belongs to connection
//! `k mod C`, so each connection sends at `rate / C`, the connections are
//! evenly staggered, and the union is a perfectly regular stream. A worker
//! thread owns a contiguous range of connections and walks its share of the
//! global sequence in time order.

/// One worker's view of the schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    ns_per_req: f64,
    total_conns: u64,
    first_conn: u64,
    local_conns: u64,
    /// Index into this worker's share of the sequence.
    m: u64,
}

impl Schedule {
    /// `rate` requests per second over `total_conns` connections, of which
    /// this worker owns `first_conn .. first_conn + local_conns`.
    pub fn new(rate: f64, total_conns: u64, first_conn: u64, local_conns: u64) -> Self {
        assert!(rate > 0.0 && local_conns >= 1 && first_conn + local_conns <= total_conns);
        Schedule {
            ns_per_req: 1e9 / rate,
            total_conns,
            first_conn,
            local_conns,
            m: 0,
        }
    }

    /// The global sequence number of the worker's next request.
    #[inline]
    fn global(&self) -> u64 {
        let i = self.m / self.local_conns;
        let j = self.first_conn + self.m % self.local_conns;
        i * self.total_conns + j
    }

    /// The intended send time of global request `k`, ns since the start.
    #[inline]
    pub fn intended_ns(&self, k: u64) -> u64 {
        (k as f64 * self.ns_per_req) as u64
    }

    /// The next request: (local connection index, intended time in ns).
    #[inline]
    pub fn peek(&self) -> (usize, u64) {
        (
            (self.m % self.local_conns) as usize,
            self.intended_ns(self.global()),
        )
    }

    #[inline]
    pub fn advance(&mut self) {
        self.m += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_of_workers_is_a_regular_stream() {
        // 3 workers with 2, 3 and 1 connections; 6 connections, 1000 req/s
        let rate = 1000.0;
        let parts = [(0u64, 2u64), (2, 3), (5, 1)];
        let mut all = Vec::new();
        for &(first, local) in &parts {
            let mut s = Schedule::new(rate, 6, first, local);
            let mut last = 0;
            // 600 rounds: every connection sends 600 requests
            for n in 0..600 * local {
                let (lc, t) = s.peek();
                assert!(t >= last, "a worker's times never go back");
                last = t;
                assert_eq!(lc as u64, n % local);
                all.push((t, first + lc as u64));
                s.advance();
            }
        }
        all.sort();
        // 3600 requests at exactly 1 ms spacing: 0, 1ms, 2ms, ...
        assert_eq!(all.len(), 3600);
        for (k, &(t, conn)) in all.iter().enumerate() {
            assert_eq!(t, k as u64 * 1_000_000, "request {k}");
            assert_eq!(conn, k as u64 % 6);
        }
    }

    #[test]
    fn each_connection_runs_at_rate_over_conns() {
        let mut s = Schedule::new(50_000.0, 8, 4, 4);
        let mut per_conn: Vec<Vec<u64>> = vec![Vec::new(); 4];
        for _ in 0..4000 {
            let (lc, t) = s.peek();
            per_conn[lc].push(t);
            s.advance();
        }
        for (lc, times) in per_conn.iter().enumerate() {
            // global conn 4+lc: first request at (4+lc)/rate
            assert_eq!(times[0], (4 + lc as u64) * 20_000);
            for w in times.windows(2) {
                // 8 conns at 50k/s: every 160 us per connection
                assert!((w[1] - w[0]).abs_diff(160_000) <= 1);
            }
        }
    }

    #[test]
    fn fractional_rates() {
        let s = Schedule::new(3.0, 1, 0, 1);
        assert_eq!(s.intended_ns(3), 1_000_000_000);
        assert_eq!(s.intended_ns(1), 333_333_333);
    }
}
