"""Small helpers with no project imports (sizes); also upstream's ``app.utils`` names."""

__all__: list[str] = []
