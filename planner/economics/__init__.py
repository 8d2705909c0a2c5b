"""economics: What it costs: hourly prices, purchase options, storage, managed APIs, provisioned and ownership cost, buying advice and price review."""
