"""The built wheel, installed outside the source tree."""
