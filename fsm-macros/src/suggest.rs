//! "Did you mean" suggestions for a name that names nothing: the closest
//! candidate, when it is close enough to be a typo. (Misspelled attribute
//! keys and keyword values get darling's own suggestions in `parse`.)

/// The candidate closest to `name`, when it is close enough to be a typo:
/// case differences are free, and at most a third of the longer name's
/// characters (at least one) may differ.
pub fn did_you_mean<'a>(name: &str, candidates: &'a [String]) -> Option<&'a str> {
    let lower = name.to_lowercase();
    candidates
        .iter()
        .map(|c| {
            let d = if c.to_lowercase() == lower {
                0
            } else {
                edit_distance(&lower, &c.to_lowercase())
            };
            (d, c)
        })
        .filter(|(d, c)| *d <= (c.chars().count().max(name.chars().count()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

/// The edit distance between two strings, a swap of two neighbours
/// counting as one edit (optimal string alignment).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_catch_typos_and_swaps() {
        let names: Vec<String> = ["Done", "Failed", "Pending"].map(String::from).to_vec();
        assert_eq!(did_you_mean("Dnoe", &names), Some("Done"));
        assert_eq!(did_you_mean("Faild", &names), Some("Failed"));
        assert_eq!(did_you_mean("pending", &names), Some("Pending"));
        assert_eq!(did_you_mean("Elsewhere", &names), None);
    }

    #[test]
    fn the_closest_candidate_wins() {
        let names: Vec<String> = ["Ready", "Read"].map(String::from).to_vec();
        assert_eq!(did_you_mean("Reda", &names), Some("Read"));
        assert_eq!(did_you_mean("x", &[]), None);
    }

    #[test]
    fn a_swap_of_neighbours_is_one_edit() {
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
