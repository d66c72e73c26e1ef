// Anchor of the precompiled LibTorch headers that every data-plane target reuses (torch's
// headers dominate compile time: a translation unit takes ~40 s without them, a few with).
