//! The registry as an aligned text table, for `circe registry`.

use super::registry::Registry;

const HEADER: [&str; 7] = ["intent", "from", "to", "opens task", "task id", "reply", "checks"];

impl Registry {
    /// One line per intent (sorted by name) under a header, columns padded to line up.
    pub fn table(&self) -> String {
        let mut rows: Vec<[String; 7]> = vec![HEADER.map(str::to_owned)];
        for i in self.intents.values() {
            rows.push([
                i.name.clone(),
                i.from.to_string(),
                i.to.to_string(),
                yes_no(i.opens_task),
                yes_no(i.needs_task_id),
                i.expects_reply.clone().unwrap_or_else(|| "-".to_owned()),
                if i.required_checks.is_empty() {
                    "-".to_owned()
                } else {
                    i.required_checks.join(",")
                },
            ]);
        }
        let mut widths = [0usize; 7];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in &rows {
            let mut line = String::new();
            for (k, (cell, w)) in row.iter().zip(widths).enumerate() {
                if k > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

fn yes_no(b: bool) -> String {
    (if b { "yes" } else { "no" }).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let t = Registry::builtin().table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 1 + Registry::builtin().intents.len());
        assert!(lines[0].starts_with("intent "));
        let from_col = lines[0].find("from").unwrap();
        let row = lines.iter().find(|l| l.starts_with("implement_feature ")).unwrap();
        assert_eq!(row.find("coordinator|rooster"), Some(from_col));
        let to_col = lines[0].find("  to").unwrap() + 2;
        assert_eq!(&row[to_col..to_col + 8], "engineer");
        assert!(row.ends_with("status_update  tests_passed"), "{row}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')));
    }
}
