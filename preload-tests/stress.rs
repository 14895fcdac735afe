//! A stress test under the preload (performance issue): 16 threads, shared
//! slots, cross-thread frees and realloc chains. In exact mode the live
//! bytes per site at exit must equal the truth the program computes.

use crate::common::*;

#[test]
pub(crate) fn exact_totals_survive_sixteen_threads_of_churn() {
    let (dir, prog) = compiled("stress", "stress_churn.c");
    let o = run_preloaded(&dir, &prog, &[], &[("HEAPLIVE_SAMPLE_INTERVAL", "1")]);
    assert!(o.status.success(), "status {:?}\n{}", o.status, stderr(&o));
    let truth: Vec<(String, u64)> = stdout(&o)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(truth.len(), 3, "program output:\n{}", stdout(&o));
    let stacks = only_folded(&dir);
    let by_leaf = bytes_by_leaf(&stacks);
    for (site, bytes) in &truth {
        assert_eq!(
            by_leaf.get(site).copied().unwrap_or(0),
            *bytes,
            "site {site}\nprofile: {by_leaf:?}"
        );
    }
    // Nothing else of the program is live but stdio's buffer.
    let others: u64 = by_leaf
        .iter()
        .filter(|(k, _)| !truth.iter().any(|(s, _)| s == *k))
        .map(|(_, v)| *v)
        .sum();
    assert!(
        others <= 8192,
        "unexpected live memory outside the sites: {by_leaf:?}"
    );
}
