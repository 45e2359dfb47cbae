//! A deprecation schedule as the rules hold it: the day a name was deprecated, the day after
//! which it stops resolving, and what to use instead. Data only; [`crate::deprecation`] applies
//! the schedules to the rules.

use std::fmt;

/// A calendar day (UTC), as days since 1970-01-01.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(i64);

impl Date {
    /// The day of a Unix time in seconds.
    pub fn from_unix(seconds: i64) -> Self {
        Self(seconds.div_euclid(86_400))
    }

    pub fn from_ymd(year: i64, month: u32, day: u32) -> Option<Self> {
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        // Days from civil (Howard Hinnant's algorithm), proleptic Gregorian.
        let y = if month <= 2 { year - 1 } else { year };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        Some(Self(era * 146_097 + doe - 719_468))
    }

    /// (year, month, day).
    pub fn ymd(self) -> (i64, u32, u32) {
        let z = self.0 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        (year, month, day)
    }

    /// Days from `self` to `later` (negative when `later` is earlier).
    pub fn days_until(self, later: Date) -> i64 {
        later.0 - self.0
    }
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

impl std::str::FromStr for Date {
    type Err = String;

    /// `YYYY-MM-DD`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{text}` is not a date: write it YYYY-MM-DD (`2027-05-01`)");
        let mut parts = text.splitn(3, '-');
        let (Some(y), Some(m), Some(d)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        if y.len() != 4 || m.len() != 2 || d.len() != 2 {
            return Err(bad());
        }
        let year = y.parse::<i64>().map_err(|_| bad())?;
        let month = m.parse::<u32>().map_err(|_| bad())?;
        let day = d.parse::<u32>().map_err(|_| bad())?;
        Self::from_ymd(year, month, day).ok_or_else(bad)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = self.ymd();
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

/// When a name was deprecated, after which day it stops resolving, and what to use instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deprecation {
    pub since: Date,
    pub remove_after: Date,
    /// The name to use instead (for an alias, its tool's name by default).
    pub use_instead: Option<String>,
}

impl Deprecation {
    /// Whether the name has stopped resolving on `today`.
    pub fn is_over(&self, today: Date) -> bool {
        today > self.remove_after
    }

    /// The sentence for a description: `Deprecated: `old` (since ...; stops working after
    /// ...): use `new`.`
    pub fn notice(&self, name: &str, instead: &str) -> String {
        let instead = self.use_instead.as_deref().unwrap_or(instead);
        format!(
            "Deprecated name `{name}` (since {}; stops working after {}): use `{instead}`.",
            self.since, self.remove_after
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_count_days() {
        for text in [
            "1970-01-01",
            "2000-02-29",
            "2026-11-23",
            "2027-05-01",
            "2100-12-31",
        ] {
            let date: Date = text.parse().expect(text);
            assert_eq!(date.to_string(), text);
        }
        assert_eq!("1970-01-02".parse::<Date>().expect("date"), Date(1));
        assert!("2027-02-29".parse::<Date>().is_err());
        assert!("2027-5-1".parse::<Date>().is_err());
        assert!("soon".parse::<Date>().is_err());
        let a: Date = "2026-11-23".parse().expect("date");
        let b: Date = "2027-05-01".parse().expect("date");
        assert_eq!(a.days_until(b), 159);
        assert_eq!(
            Date::from_unix(1_795_392_000),
            "2026-11-23".parse().expect("date")
        );
        assert_eq!(
            Date::from_unix(1_795_391_999),
            "2026-11-22".parse().expect("date")
        );
    }

    #[test]
    fn a_notice_names_the_dates_and_the_replacement() {
        let d = Deprecation {
            since: "2026-11-01".parse().expect("date"),
            remove_after: "2027-05-01".parse().expect("date"),
            use_instead: None,
        };
        assert_eq!(
            d.notice("discover_goals", "discover_sub_goals"),
            "Deprecated name `discover_goals` (since 2026-11-01; stops working after 2027-05-01): use `discover_sub_goals`."
        );
        assert!(!d.is_over("2027-05-01".parse().expect("date")));
        assert!(d.is_over("2027-05-02".parse().expect("date")));
    }
}
