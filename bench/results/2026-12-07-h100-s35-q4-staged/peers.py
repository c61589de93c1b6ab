import torch
x = torch.randn(16384 * 16384 // 4, device="cuda", dtype=torch.bfloat16)  # 134 MB, the packed q4 weight's bytes
y = torch.empty_like(x)
a = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)
v = torch.randn(16384, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    y.copy_(x)
    torch.mv(a, v)
torch.cuda.synchronize()
