"""Fakes of the parts the consumer engine talks to, so its logic is tested without a broker."""
