-- Budget dates are days of the years 1 to 9999, as the API and the CLI read and write them (YYYY-MM-DD): a date
-- raw SQL wrote outside them (infinity, a year BC or past 9999) would be one that no listing could show.
ALTER TABLE expenses ADD CONSTRAINT expenses_due_date_range
    CHECK (due_date BETWEEN DATE '0001-01-01' AND DATE '9999-12-31');
ALTER TABLE expense_payments ADD CONSTRAINT expense_payments_paid_at_range
    CHECK (paid_at BETWEEN DATE '0001-01-01' AND DATE '9999-12-31');
