"""Python twin of the built-in `cnn` (trainer/models/simple_nets.h): same module names and shapes.
Trains it on Fashion-MNIST (SGD momentum 0.9, lr 0.05, batch 256, 2 epochs) and prints test
accuracy; one run on 1 CPU thread gave 0.8836 after the first epoch. Not run by ctest (slow)."""
import gzip, numpy as np, torch, torch.nn as nn, time
torch.set_num_threads(1); torch.manual_seed(0)
d='/usr/share/datasets/fashion-mnist/'
def imgs(f): return np.frombuffer(gzip.open(d+f).read(),np.uint8,offset=16).reshape(-1,1,28,28)
def labs(f): return np.frombuffer(gzip.open(d+f).read(),np.uint8,offset=8)
xtr=(torch.tensor(imgs('train-images-idx3-ubyte.gz')).float()/255-0.2860)/0.3530; ytr=torch.tensor(labs('train-labels-idx1-ubyte.gz')).long()
xte=(torch.tensor(imgs('t10k-images-idx3-ubyte.gz')).float()/255-0.2860)/0.3530; yte=torch.tensor(labs('t10k-labels-idx1-ubyte.gz')).long()
class CNN(nn.Module):
    def __init__(s,c=1,k=10,h=28,w=28):
        super().__init__()
        s.conv1=nn.Conv2d(c,32,3,padding=1,bias=False); s.bn1=nn.BatchNorm2d(32)
        s.conv2=nn.Conv2d(32,32,3,padding=1,bias=False); s.bn2=nn.BatchNorm2d(32)
        s.conv3=nn.Conv2d(32,64,3,padding=1,bias=False); s.bn3=nn.BatchNorm2d(64)
        s.conv4=nn.Conv2d(64,64,3,padding=1,bias=False); s.bn4=nn.BatchNorm2d(64)
        s.fc1=nn.Linear(64*(h//4)*(w//4),256); s.fc2=nn.Linear(256,k)
    def forward(s,x):
        r=torch.relu; p=nn.functional.max_pool2d
        x=r(s.bn1(s.conv1(x))); x=p(r(s.bn2(s.conv2(x))),2)
        x=r(s.bn3(s.conv3(x))); x=p(r(s.bn4(s.conv4(x))),2)
        return s.fc2(r(s.fc1(x.flatten(1))))
m=CNN(); opt=torch.optim.SGD(m.parameters(),lr=0.05,momentum=0.9)
t=time.time()
for ep in range(2):
    m.train(); perm=torch.randperm(60000)
    for i in range(0,60000,256):
        idx=perm[i:i+256]; loss=nn.functional.cross_entropy(m(xtr[idx]),ytr[idx]); opt.zero_grad(); loss.backward(); opt.step()
    m.eval()
    with torch.no_grad(): acc=sum((m(xte[i:i+1000]).argmax(1)==yte[i:i+1000]).sum().item() for i in range(0,10000,1000))/10000
    print('epoch',ep,'acc',acc,'t',time.time()-t,flush=True)
print(sum(p.numel() for p in m.parameters()))
