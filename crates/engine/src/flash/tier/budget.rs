//! The device write budget (`ext_write_budget`): a token bucket of bytes
//! per second, with bursts of one second, that admissions take from and
//! writes that cannot be refused are charged to.

use super::*;

impl FlashTier {
    /// Whether `bytes` of device writes fit the write budget
    /// (`ext_write_budget`) now; they are taken from it if so. Always with
    /// no budget. The small-object store asks before it admits an item.
    pub fn take_write_budget(&self, bytes: usize) -> bool {
        if self.params.write_budget == 0 {
            return true;
        }
        let mut st = self.state.lock();
        if self.take_budget(&mut st, bytes) {
            return true;
        }
        self.stats.admission_refused.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Takes `bytes` of device writes that were made whatever the budget
    /// (the small-object store's set rewrites for changes, which cannot
    /// be refused) from the write budget: admissions wait until it is paid
    /// back (a debt of one second of budget at most). Nothing with no budget.
    pub fn charge_write_budget(&self, bytes: usize) {
        if self.params.write_budget == 0 || bytes == 0 {
            return;
        }
        let mut st = self.state.lock();
        if !self.take_budget(&mut st, bytes) {
            let rate = self.params.write_budget as f64;
            st.budget_tokens = (st.budget_tokens - bytes as f64).max(-rate);
        }
    }

    pub(super) fn take_budget(&self, st: &mut State, size: usize) -> bool {
        let rate = self.params.write_budget as f64;
        let now = Instant::now();
        let dt = now.duration_since(st.budget_at).as_secs_f64();
        st.budget_at = now;
        // Bursts of up to one second of budget.
        st.budget_tokens = (st.budget_tokens + dt * rate).min(rate);
        if st.budget_tokens >= size as f64 {
            st.budget_tokens -= size as f64;
            true
        } else {
            false
        }
    }
}
