"""Real-trace readers: ShareGPT V3 conversations and BFCL v4 multi-turn function calling."""
