"""The ground every part stands on: the error types (`errors`), the process's exit codes (`exit_codes`), the retry
policy (`retries`), each attempt's deadline (`deadlines`), the one HTTP client of clearmed's own requests (`http`),
the endpoints a run has reached (`endpoints`), secret redaction (`sanitize`), the consoles output goes to (`console`)
and the version (`version`). It imports nothing of clearmed above it."""
