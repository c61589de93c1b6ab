"""Issue 17: malformed or abusive kernels, launches and caches, each with its exact expected outcome (a located error
or a correct result on every backend); none may crash the process, hang or answer wrongly."""
