/* Batch staging from a data set held on the device (src/train.c). */

/* splitmix64's finaliser; src/train.c computes the same on the host (clcnn_augment_sample). */
ulong aug_mix(ulong z) {
    z += 0x9E3779B97F4A7C15UL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    return z ^ (z >> 31);
}

/* Stages a batch from a data set held on the device as bytes: x[b] = (pixel/255 - mean[c]) *
 * inv_std[c] for sample s = order[first + b] (or first + b when use_order is 0), with its label.
 * norm holds C means then C inverse standard deviations. With pad > 0 or hflip, the pixel comes
 * from torchvision's RandomCrop(padding=pad) then RandomHorizontalFlip of sample s: h =
 * aug_mix(key ^ s * 0xD1B54A32D192ED03) gives the crop's corner dy = (h mod 2^32) % (2 pad + 1),
 * dx = ((h >> 32) mod 2^31) % (2 pad + 1) in the padded image and the flip (h >> 63, with
 * hflip); a pixel of the padding is 0 before scaling and normalisation. */
__kernel void gather_batch(__global float *x, __global uchar *labels_out,
                           __global const uchar *images, __global const uchar *labels,
                           __global const int *order, int use_order, int first, int N, int C,
                           int H, int W, __global const float *norm, ulong key, int pad,
                           int hflip) {
    int i = get_global_id(0), HW = H * W;
    if (i >= N * C * HW) return;
    int p = i % HW, c = (i / HW) % C, b = i / (HW * C);
    int s = use_order ? order[first + b] : first + b;
    int q = p, inside = 1;
    if (pad > 0 || hflip) {
        ulong h = aug_mix(key ^ ((ulong)s * 0xD1B54A32D192ED03UL));
        uint span = (uint)(2 * pad + 1);
        int dy = (int)((uint)h % span), dx = (int)((uint)((h >> 32) & 0x7FFFFFFFUL) % span);
        int y = p / W, xx = p % W;
        if (hflip && (h >> 63)) xx = W - 1 - xx;
        int sy = y + dy - pad, sx = xx + dx - pad;
        inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
        q = sy * W + sx;
    }
    float v = inside ? (float)images[((long)s * C + c) * HW + q] / 255.0f : 0.0f;
    x[i] = (v - norm[c]) * norm[C + c];
    if (c == 0 && p == 0) labels_out[b] = labels[s];
}
