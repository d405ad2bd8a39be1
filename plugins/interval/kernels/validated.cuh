{#
  validated.cuh -- guaranteed integration of x' = f(x, c, t) over a box of inputs by an
  interval Taylor method with Lohner's QR form, and the SIVIA verdict of one box.

  Needs, before it: interval.cuh, taylor.cuh, and the model's generated functions
      iv_taylor_x(K, x, c, t0)      Taylor coefficients of x (IV_N series)
      iv_taylor_xv(K, xv, c, t0)    of x and V = dx(t)/dz(t0) (IV_N + IV_N*IV_D series)
      iv_initial(x, c, t, x0)       x(0) from the constants
      iv_outputs(x, c, t, y)        the measured values
  and the sizes IV_N (states), IV_NQ (interval constants), IV_D = IV_N + IV_NQ,
  IV_NC (constants), IV_NY (measured ids), SBMLGPU_TAYLOR_ORDER (p).

  One step from t to t1 (h = t1 - t, enclosed as the interval H):
  1. a-priori enclosure A of x over [t, t1] (Picard-Lindelof): X + [0,H] f(A, [t,t1])
     inside A proves that every solution from X stays in A (epsilon inflation,
     IV_APRIORI_TRIES tries; none: the step fails and the caller halves h);
  2. remainder  R = x_p(A) H^p  (the Lagrange form: x_p over A encloses x^(p)(xi)/p!);
     wider than the tolerance: the caller shortens h by iv_step_factor (accuracy
     only: the last allowed try accepts any remainder);
  3. Taylor polynomial at the centre: u = sum_{k<p} x_k(zhat) H^k;
  4. its Jacobian over the box: S = sum_{k<p} V_k(X, Q) H^k (x rows; q rows 0 | I);
  5. mean value theorem: x(t1) in u + R + S (z - zhat), z in (X, Q). Lohner's form keeps
     z - zhat as B r (B a point basis, r an interval vector): with A = S B,
     B1 = Q-factor of mid(A) (columns ordered by their length times r's width),
     r1 = (B1^-1 A) r + B1^-1 (u + R - zhat1), zhat1 = mid(u + R);
     B1^-1 is enclosed rigorously (C = B1^T, ||I - C B1|| = d < 1/2 gives
     B1^-1 in C +- ||C|| d / (1 - d)); if not, B1 = I.
  6. X1 = (zhat1 + B1 r1) intersected with the plain mean-value box u + R + S (X - xhat, Q - qhat).
  Every operation on intervals rounds outward; the QR and the centres are plain
  floating point because nothing depends on them being exact (they choose
  coordinates; the enclosures above hold for any choice).
#}
#ifndef IV_APRIORI_TRIES
#define IV_APRIORI_TRIES 4
#endif
#define IV_SPAN_MIN 2  /* the fewest data times a span check covers */
#define IV_SPAN_SINGLES 8  /* times checked alone after the shortest span failed */
#define IV_SPAN_STREAK 4  /* span checks passed in a row before the span doubles (one
                             that fails costs a check: doubling after every pass would
                             fail every other check where the span is about right) */
#define IV_NV (IV_N * IV_D)
#define IV_NXV (IV_N + IV_NV)

/* the verdicts of a box, IV_REJECTED, IV_FEASIBLE, IV_UNDECIDED and IV_FAILED (undecided:
   the integration could not go on), are defined by the including template from
   plugins/interval/verdicts.py, never copied by hand */

typedef struct {
    double t;
    double zhat[IV_D];      /* centre: xhat, then qhat */
    double B[IV_D * IV_D];  /* basis, row-major */
    ival r[IV_D];           /* z in zhat + B r */
    ival X[IV_N];           /* box of x at t */
} iv_state;

/* the scratch a step needs (local memory on the GPU); after a step it still holds
   the step's pieces (Taylor coefficients at the centre, the remainder coefficient,
   the variational coefficients over the box) and the state it started from, for
   iv_dense at the data times inside the step */
typedef struct {
    ival coef[(SBMLGPU_TAYLOR_ORDER + 1) * IV_N];
    ival xv[(SBMLGPU_TAYLOR_ORDER + 1) * IV_NXV];
    ival A[IV_D * IV_D];
    ival Binv[IV_D * IV_D];
    double B1[IV_D * IV_D];
    ival remainder[IV_N];   /* x_p over the a-priori box (times tau^p at a time tau in) */
    double excess;          /* the last step's remainder over its allowance (largest over
                               x; 0 when the a-priori enclosure failed first) */
    ival dz[IV_D];          /* z - zhat at the step's start: (X - xhat, Q - qhat) */
    iv_state start;         /* the state the step started from */
} iv_scratch;

SBMLGPU_HD double iv_mag(ival a) { return fmax(fabs(a.lo), fabs(a.hi)); }

/* sum_k c_k H^k, k < K (Horner) */
SBMLGPU_HD ival iv_horner(const ival *coef, int stride, int K, ival H)
{
    ival sum = coef[(K - 1) * stride];
    for (int k = K - 2; k >= 0; --k)
        sum = iv_add(iv_mul(sum, H), coef[k * stride]);
    return sum;
}

/* step 1: an enclosure A of x over [t, t1]; 0 if none was proved */
SBMLGPU_HD int iv_apriori(const ival *X, const ival *c, ival T, ival H0, ival *A,
                          iv_scratch *w)
{
    ival *coef = w->coef;
    for (int i = 0; i < IV_N; ++i)
        coef[i] = X[i];
    iv_taylor_x(1, coef, c, T);
    ival guess[IV_N];
    for (int i = 0; i < IV_N; ++i)
        guess[i] = iv_add(X[i], iv_mul(H0, coef[IV_N + i]));
    for (int attempt = 0; attempt < IV_APRIORI_TRIES; ++attempt) {
        for (int i = 0; i < IV_N; ++i) {  /* inflate: the fixed point needs some room */
            double grow = sbmlgpu_add_ru(0.5 * iv_width(guess[i]),
                                         1e-14 * (1.0 + iv_mag(guess[i])));
            A[i] = iv_make(sbmlgpu_sub_rd(guess[i].lo, grow), sbmlgpu_add_ru(guess[i].hi, grow));
            coef[i] = A[i];
        }
        iv_taylor_x(1, coef, c, T);
        int inside = 1;
        for (int i = 0; i < IV_N; ++i) {
            guess[i] = iv_add(X[i], iv_mul(H0, coef[IV_N + i]));
            inside = inside && iv_is_finite(guess[i]) && iv_subset(guess[i], A[i]);
        }
        if (inside) {
            for (int i = 0; i < IV_N; ++i)
                A[i] = guess[i];  /* the image is an enclosure too, and tighter */
            return 1;
        }
    }
    return 0;
}

/* step 5's basis: B1 = Q of mid(A) by modified Gram-Schmidt on the columns, longest
   (|column| * width(r)) first; Binv encloses B1^-1. 0: fall back to the identity. */
SBMLGPU_HD int iv_new_basis(const ival *A, const ival *r, double *B1, ival *Binv)
{
    int order[IV_D];
    double length[IV_D];
    for (int j = 0; j < IV_D; ++j) {
        double norm = 0.0;
        for (int i = 0; i < IV_D; ++i) {
            double m = iv_mid(A[i * IV_D + j]);
            norm += m * m;
        }
        length[j] = sqrt(norm) * iv_width(r[j]);
        order[j] = j;
    }
    for (int a = 1; a < IV_D; ++a)  /* insertion sort, longest first */
        for (int b = a; b > 0 && length[order[b]] > length[order[b - 1]]; --b) {
            int swap = order[b]; order[b] = order[b - 1]; order[b - 1] = swap;
        }
    for (int col = 0; col < IV_D; ++col) {
        double v[IV_D];
        for (int i = 0; i < IV_D; ++i)
            v[i] = iv_mid(A[i * IV_D + order[col]]);
        for (int pass = 0; pass < 2; ++pass)  /* twice: Gram-Schmidt loses orthogonality */
            for (int prev = 0; prev < col; ++prev) {
                double dot = 0.0;
                for (int i = 0; i < IV_D; ++i)
                    dot += v[i] * B1[i * IV_D + prev];
                for (int i = 0; i < IV_D; ++i)
                    v[i] -= dot * B1[i * IV_D + prev];
            }
        double norm = 0.0;
        for (int i = 0; i < IV_D; ++i)
            norm += v[i] * v[i];
        norm = sqrt(norm);
        if (!(norm > 1e-300))
            return 0;
        for (int i = 0; i < IV_D; ++i)
            B1[i * IV_D + col] = v[i] / norm;
    }
    /* R = I - B1^T B1 in interval arithmetic; d = ||R||_inf rounded up */
    double d = 0.0, normC = 0.0;
    for (int i = 0; i < IV_D; ++i) {
        double row = 0.0, rowC = 0.0;
        for (int j = 0; j < IV_D; ++j) {
            ival sum = iv_point(i == j ? 1.0 : 0.0);
            for (int k = 0; k < IV_D; ++k)
                sum = iv_sub(sum, iv_mul(iv_point(B1[k * IV_D + i]), iv_point(B1[k * IV_D + j])));
            row = sbmlgpu_add_ru(row, iv_mag(sum));
            rowC = sbmlgpu_add_ru(rowC, fabs(B1[j * IV_D + i]));
        }
        d = fmax(d, row);
        normC = fmax(normC, rowC);
    }
    if (!(d < 0.5))
        return 0;
    double e = sbmlgpu_div_ru(sbmlgpu_mul_ru(normC, d), sbmlgpu_sub_rd(1.0, d));
    for (int i = 0; i < IV_D; ++i)
        for (int j = 0; j < IV_D; ++j) {
            double cij = B1[j * IV_D + i];  /* C = B1^T */
            Binv[i * IV_D + j] = iv_make(sbmlgpu_sub_rd(cij, e), sbmlgpu_add_ru(cij, e));
        }
    return 1;
}

/* one step of s from s->t to t1 (> s->t); c_box: the constants with the interval
   inputs, c_mid: with their centres. 0: no a-priori enclosure, or a remainder wider
   than `tolerance` allows (try a shorter step; INFINITY accepts any remainder);
   -1: the enclosure is lost (not finite, or the two forms disagree). */
SBMLGPU_HD int iv_step(iv_state *s, double t1, const ival *c_box, const ival *c_mid,
                       double tolerance, iv_scratch *w)
{
    const int p = SBMLGPU_TAYLOR_ORDER;
    ival H = iv_sub(iv_point(t1), iv_point(s->t));
    ival T = iv_make(s->t, t1);
    ival apriori[IV_N];
    w->excess = 0.0;
    if (!iv_apriori(s->X, c_box, T, iv_make(0.0, H.hi), apriori, w))
        return 0;

    /* 2. remainder over the a-priori box */
    ival *coef = w->coef;
    for (int i = 0; i < IV_N; ++i)
        coef[i] = apriori[i];
    iv_taylor_x(p, coef, c_box, T);
    ival Hp = iv_powi(H, p);
    ival v[IV_D];
    /* 3. the polynomial at the centre; v = u + R */
    ival remainder[IV_N];
    int within = 1;
    for (int i = 0; i < IV_N; ++i) {
        w->remainder[i] = coef[p * IV_N + i];
        remainder[i] = iv_mul(coef[p * IV_N + i], Hp);
        /* accuracy, not soundness: a remainder small against the value, or against
           the box's own width (a wide box cannot be tighter than its spread) */
        double allowed = fmax(tolerance * (1.0 + iv_mag(s->X[i])), 1e-3 * iv_width(s->X[i]));
        double width = iv_width(remainder[i]);
        if (!(width <= allowed)) {  /* NaN too */
            within = 0;
            w->excess = allowed > 0.0 && width < INFINITY ? fmax(w->excess, width / allowed)
                                                          : INFINITY;
        } else if (allowed > 0.0) {
            w->excess = fmax(w->excess, width / allowed);
        }
    }
    if (!within)
        return 0;
    for (int i = 0; i < IV_N; ++i)
        coef[i] = iv_point(s->zhat[i]);
    iv_taylor_x(p - 1, coef, c_mid, iv_point(s->t));
    for (int i = 0; i < IV_N; ++i)
        v[i] = iv_add(iv_horner(coef + i, IV_N, p, H), remainder[i]);
    for (int i = IV_N; i < IV_D; ++i)
        v[i] = iv_point(s->zhat[i]);

    /* 4. the Jacobian of the polynomial over the box (x rows) */
    ival *xv = w->xv;
    for (int i = 0; i < IV_N; ++i) {
        xv[i] = s->X[i];
        for (int j = 0; j < IV_D; ++j)
            xv[IV_N + i * IV_D + j] = iv_point(i == j ? 1.0 : 0.0);
    }
    iv_taylor_xv(p - 1, xv, c_box, iv_point(s->t));

    /* 5. A = S B; the plain mean-value box Xmv = v + S (z - zhat) */
    ival *dz = w->dz;
    for (int i = 0; i < IV_N; ++i)
        dz[i] = iv_sub(s->X[i], iv_point(s->zhat[i]));
    for (int j = IV_N; j < IV_D; ++j)
        dz[j] = iv_sub(c_box[iv_varied(j - IV_N)], iv_point(s->zhat[j]));
    ival mean_value[IV_N];
    for (int i = 0; i < IV_N; ++i) {
        ival row[IV_D];
        for (int j = 0; j < IV_D; ++j)
            row[j] = iv_horner(xv + IV_N + i * IV_D + j, IV_NXV, p, H);
        ival sum = v[i];
        for (int j = 0; j < IV_D; ++j)
            sum = iv_add(sum, iv_mul(row[j], dz[j]));
        mean_value[i] = sum;
        for (int k = 0; k < IV_D; ++k) {
            ival a = iv_point(0.0);
            for (int j = 0; j < IV_D; ++j)
                a = iv_add(a, iv_mul(row[j], iv_point(s->B[j * IV_D + k])));
            w->A[i * IV_D + k] = a;
        }
    }
    for (int i = IV_N; i < IV_D; ++i)  /* q rows of S are 0 | I: A's are B's */
        for (int k = 0; k < IV_D; ++k)
            w->A[i * IV_D + k] = iv_point(s->B[i * IV_D + k]);

    double zhat1[IV_D];
    for (int i = 0; i < IV_D; ++i)
        zhat1[i] = i < IV_N ? iv_mid(v[i]) : s->zhat[i];
    double *B1 = w->B1;
    ival *Binv = w->Binv;
    if (!iv_new_basis(w->A, s->r, B1, Binv)) {
        for (int i = 0; i < IV_D * IV_D; ++i) {
            B1[i] = (i % (IV_D + 1)) == 0 ? 1.0 : 0.0;
            Binv[i] = iv_point(B1[i]);
        }
    }
    /* r1 = (Binv A) r + Binv (v - zhat1) */
    ival r1[IV_D];
    for (int i = 0; i < IV_D; ++i) {
        ival sum = iv_point(0.0);
        for (int j = 0; j < IV_D; ++j) {
            ival pij = iv_point(0.0);
            for (int k = 0; k < IV_D; ++k)
                pij = iv_add(pij, iv_mul(Binv[i * IV_D + k], w->A[k * IV_D + j]));
            sum = iv_add(sum, iv_mul(pij, s->r[j]));
            if (j < IV_N)
                sum = iv_add(sum, iv_mul(Binv[i * IV_D + j], iv_sub(v[j], iv_point(zhat1[j]))));
        }
        r1[i] = sum;
    }
    /* 6. the new box (built aside: the state changes only when the step succeeds),
       and the state (the old one kept for iv_dense) */
    ival X1[IV_N];
    for (int i = 0; i < IV_N; ++i) {
        ival sum = iv_point(zhat1[i]);
        for (int k = 0; k < IV_D; ++k)
            sum = iv_add(sum, iv_mul(iv_point(B1[i * IV_D + k]), r1[k]));
        X1[i] = iv_intersect(sum, mean_value[i]);
        /* two enclosures of one set cannot be disjoint: empty means lost */
        if (!(X1[i].lo <= X1[i].hi) || !iv_is_finite(X1[i]))
            return -1;
    }
    w->start = *s;
    for (int i = 0; i < IV_N; ++i)
        s->X[i] = X1[i];
    for (int i = 0; i < IV_D; ++i) {
        s->zhat[i] = zhat1[i];
        s->r[i] = r1[i];
    }
    for (int i = 0; i < IV_D * IV_D; ++i)
        s->B[i] = B1[i];
    s->t = t1;
    return 1;
}

/* The box of x at the times T (a point, or a span of times) inside (start, start + h]
   of the step just taken (its pieces are in w): the Taylor polynomial at the centre,
   the remainder coefficient over the a-priori box (valid at every time of the step)
   times tau^p, and the Jacobian of the polynomial at tau applied in Lohner's
   coordinates (start B, r), intersected with the plain mean-value form. Data times
   inside a step cost this, not a step. Over a span, every operation takes tau as an
   interval, so the box holds x at every time of the span (inclusion isotonicity: it
   also holds the box of each time of the span alone).
   0: the two forms are disjoint (only an unsound enclosure could do that): the box
   is failed, never decided. */
SBMLGPU_HD int iv_dense(const iv_scratch *w, ival T, ival *X)
{
    const int p = SBMLGPU_TAYLOR_ORDER;
    const iv_state *s0 = &w->start;
    ival tau = iv_sub(T, iv_point(s0->t));
    ival taup = iv_powi(tau, p);
    for (int i = 0; i < IV_N; ++i) {
        ival v = iv_add(iv_horner(w->coef + i, IV_N, p, tau), iv_mul(w->remainder[i], taup));
        ival row[IV_D];
        ival plain = v;
        for (int j = 0; j < IV_D; ++j) {
            row[j] = iv_horner(w->xv + IV_N + i * IV_D + j, IV_NXV, p, tau);
            plain = iv_add(plain, iv_mul(row[j], w->dz[j]));
        }
        ival lohner = v;
        for (int k = 0; k < IV_D; ++k) {
            ival a = iv_point(0.0);
            for (int j = 0; j < IV_D; ++j)
                a = iv_add(a, iv_mul(row[j], iv_point(s0->B[j * IV_D + k])));
            lohner = iv_add(lohner, iv_mul(a, s0->r[k]));
        }
        X[i] = iv_intersect(lohner, plain);
        if (!(X[i].lo <= X[i].hi))  /* two enclosures of one set: empty means lost */
            return 0;
    }
    return 1;
}

/* The data and limits every box is checked against: times[m] ascending, measurements
   first[m] .. first[m+1]-1 at times[m] (output[k]: index of the measured value,
   [lower[k], upper[k]] its interval). */
typedef struct {
    int n_times;
    const double *times;
    const int *first, *output;
    const double *lower, *upper;
    double epsilon;       /* boxes with an unknown's edge wider than this are split */
    double wide;          /* > 0: a splittable box stops once an output's enclosure is
                             wider than this times its data interval (it will be split;
                             0: carried to the last time) */
    double max_step;      /* 0: no limit */
    double tolerance;     /* remainder width per step, relative to 1 + |x| */
    int max_halvings;     /* of a step whose a-priori enclosure fails */
    long long max_steps;  /* per box */
    int span_max;         /* data times a span check may cover (< 2: each time alone) */
    int step_rule;        /* IV_STEPS_DOUBLING or IV_STEPS_PREDICTED */
} iv_problem;

/* How the next step's length is chosen (options.STEP_RULES, in this order):
   doubling: twice the last after a step, half after a failure;
   predicted: from the remainder's width over its allowance, `excess` (the remainder
   grows about as h^p: 0.9 excess^(-1/p) would just meet it): the largest of 4, 4 r,
   4 r^2, ... (r = 2^(-1/4)) at or below that, but at least 1 after a step; 1/2, r/2,
   ... down to 1/8 after a failure; half after a failed a-priori enclosure, which gives
   no such measure. Products and quotients only, no pow (whose last bits differ between
   the host and the GPU): the lengths are the same on both. Either way each step is
   proved; the rule only decides how many tries and steps a box takes. */
#define IV_STEPS_DOUBLING 0
#define IV_STEPS_PREDICTED 1
#define IV_STEP_RATIO 0.8408964152537145  /* 2^(-1/4): the factors' spacing */

/* c^p, p = SBMLGPU_TAYLOR_ORDER: excess <= (0.9 / f)^p is 0.9 excess^(-1/p) >= f */
SBMLGPU_HD double iv_order_power(double c)
{
    double power = 1.0;
    for (int k = 0; k < SBMLGPU_TAYLOR_ORDER; ++k)
        power *= c;
    return power;
}

SBMLGPU_HD double iv_step_factor(int rule, int accepted, double excess)
{
    if (rule != IV_STEPS_PREDICTED || !(excess > 0.0))
        return accepted ? 2.0 : 0.5;
    double f = accepted ? 4.0 : 0.5, least = accepted ? 1.0 : 0.125;
    while (f > least && !(excess <= iv_order_power(0.9 / f)))
        f *= IV_STEP_RATIO;
    return fmax(f, least);
}

#define IV_RUNNING (-1)

/* One box in progress: resumable, so a persistent kernel can pause it between steps. */
typedef struct {
    iv_state s;
    ival c_box[IV_NC > 0 ? IV_NC : 1];  /* the constants with the box's intervals */
    ival c_mid[IV_NC > 0 ? IV_NC : 1];  /* ... with their centres */
    int m;           /* the next data time */
    int inside;      /* every output so far inside its data interval */
    int splittable;  /* an unknown's edge is wider than epsilon: SIVIA would bisect it */
    int halvings;    /* of the current step */
    double h_next;
    long long steps;
    long long enclosures;  /* evaluated at data times inside steps (a span: one) */
    int span;        /* data times the next span check covers */
    int single_until;  /* data times before this index are checked one at a time */
    int step_end;      /* the first data time at or after s.t (iv_first_at_or_after) */
    int span_streak;   /* span checks passed since the span last changed */
} iv_box;

/* The first data time at or after t, from index `from` on (n_times: none); by
   bisection, once a step: the spans then know where the step ends without a scan. */
SBMLGPU_HD int iv_first_at_or_after(const iv_problem *P, int from, double t)
{
    int lo = from, hi = P->n_times;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (P->times[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Start a box (q_lo, q_hi: IV_NQ each; point: IV_NC constants). IV_RUNNING, or
   IV_FAILED when the initial values are not finite. */
SBMLGPU_HD int iv_box_start(iv_box *b, const double *q_lo, const double *q_hi,
                            const double *point, const iv_problem *P)
{
    for (int j = 0; j < IV_NC; ++j)
        b->c_box[j] = b->c_mid[j] = iv_point(point[j]);
    b->splittable = 0;
    for (int j = 0; j < IV_NQ; ++j) {
        b->c_box[iv_varied(j)] = iv_make(q_lo[j], q_hi[j]);
        b->c_mid[iv_varied(j)] = iv_point(iv_mid(b->c_box[iv_varied(j)]));
        if (j < IV_NU && q_hi[j] - q_lo[j] > P->epsilon)  /* unknowns first, then initial */
            b->splittable = 1;
    }
    iv_state *s = &b->s;
    iv_initial(s->X, b->c_box, iv_point(0.0), s->X);
    s->t = 0.0;
    b->m = 0;
    b->inside = 1;
    b->halvings = 0;
    /* a first try: the halvings find the step the a-priori enclosure allows */
    double span = P->n_times > 0 ? P->times[P->n_times - 1] : 0.0;
    b->h_next = P->max_step > 0.0 ? P->max_step : (span > 0.0 ? span / 64.0 : INFINITY);
    b->steps = 0;
    b->enclosures = 0;
    b->span = IV_SPAN_MIN;
    b->single_until = 0;
    b->span_streak = 0;
    b->step_end = iv_first_at_or_after(P, 0, 0.0);
    for (int i = 0; i < IV_D; ++i) {
        ival box = i < IV_N ? s->X[i] : b->c_box[iv_varied(i - IV_N)];
        if (!iv_is_finite(box))
            return IV_FAILED;
        s->zhat[i] = iv_mid(box);
        s->r[i] = iv_sub(box, iv_point(s->zhat[i]));
        for (int j = 0; j < IV_D; ++j)
            s->B[i * IV_D + j] = i == j ? 1.0 : 0.0;
    }
    return IV_RUNNING;
}

/* Compare the enclosure at data time m with its measurements: IV_REJECTED when one
   misses its interval; IV_UNDECIDED when the box will be split and an enclosure is
   wider than P->wide times its data interval (its halves are checked anyway, with
   tighter enclosures; carrying such a box on could only find a rejection that wide
   enclosures rarely give); else IV_RUNNING (b->inside cleared when one is not inside). */
SBMLGPU_HD int iv_box_compare(iv_box *b, const iv_problem *P, int m, const ival *X)
{
    ival y[IV_NY > 0 ? IV_NY : 1];
    iv_outputs(X, b->c_box, iv_point(P->times[m]), y);
    int wide = 0;
    for (int k = P->first[m]; k < P->first[m + 1]; ++k) {
        ival data = iv_make(P->lower[k], P->upper[k]);
        ival value = y[P->output[k]];
        if (iv_disjoint(value, data))
            return IV_REJECTED;  /* no point of the box fits this measurement */
        if (!iv_subset(value, data)) {
            b->inside = 0;
            wide = wide || (iv_width(value) > P->wide * iv_width(data));
        }
    }
    /* every measurement of this time checked for a rejection first */
    if (wide && b->splittable && P->wide > 0.0)
        return IV_UNDECIDED;
    return IV_RUNNING;
}

/* A span check: the data times m .. last (inside the step just taken, before its end)
   at once, from X, one enclosure over the span of their times T. 1: every measurement
   of those times holds that enclosure's output inside its data interval, so each time
   alone would too (its own enclosure lies inside the span's): the times are passed with
   the verdicts that checking them one by one would give. 0: not shown (then they are
   checked in shorter spans or one by one: what they decide, and in which order, stays
   theirs). */
SBMLGPU_HD int iv_span_inside(const iv_box *b, const iv_problem *P, int m, int last,
                              const ival *X, ival T)
{
    ival y[IV_NY > 0 ? IV_NY : 1];
    iv_outputs(X, b->c_box, T, y);
    for (int k = P->first[m]; k < P->first[last + 1]; ++k)
        if (!iv_subset(y[P->output[k]], iv_make(P->lower[k], P->upper[k])))
            return 0;
    return 1;
}

/* The data times of the step just taken that one span check may cover: from m up to
   b->span of them, before the step's end (0: fewer than two). */
SBMLGPU_HD int iv_span_last(const iv_box *b, const iv_problem *P, int m)
{
    if (P->span_max < 2 || m < b->single_until)
        return 0;
    int last = (m + b->span < b->step_end ? m + b->span : b->step_end) - 1;
    return last > m ? last : 0;
}

/* After a span check: a span that passed moves the box past its times, and after
   IV_SPAN_STREAK passes in a row doubles; one that failed halves (its times are tried
   again), and where even the shortest fails the box is near its data's bounds there:
   the next IV_SPAN_SINGLES times are checked one by one. */
SBMLGPU_HD void iv_span_done(iv_box *b, const iv_problem *P, int last, int inside)
{
    if (inside) {
        b->m = last + 1;
        if (++b->span_streak >= IV_SPAN_STREAK) {
            b->span = 2 * b->span < P->span_max ? 2 * b->span : P->span_max;
            b->span_streak = 0;
        }
        return;
    }
    b->span_streak = 0;
    if (b->span > IV_SPAN_MIN)
        b->span = b->span / 2 > IV_SPAN_MIN ? b->span / 2 : IV_SPAN_MIN;
    else
        b->single_until = b->m + IV_SPAN_SINGLES;
}

/* The box's next piece of work is not a Taylor step: a data time to check (in the
   step just taken, or at its end), or, every time passed, its verdict. */
SBMLGPU_HD int iv_box_check_due(const iv_box *b, const iv_problem *P)
{
    return b->m >= P->n_times || P->times[b->m] <= b->s.t;
}

/* One piece of work on a box: a data time checked (or a span of them, or its record
   kept), or one Taylor step tried (a step that fails and is shortened counts), or,
   once every data time is passed, the verdict. Returns IV_RUNNING or the verdict.
   record (or NULL): the box of x at every data time, record[m*IV_N + i], and the
   data are not compared (the enclosure is carried to the last time; entire where
   it was not reached). */
SBMLGPU_HD int iv_box_work(iv_box *b, const iv_problem *P, ival *record, iv_scratch *w)
{
    iv_state *s = &b->s;
    int verdict = IV_RUNNING;
    if (b->m < P->n_times && P->times[b->m] <= s->t) {
        /* the data times reached: at the state's own time its box, earlier ones (inside
           the step just taken) by dense output; several times at once where the box
           is well inside their data (a span, iv_span_done), else one. Either is one
           enclosure, from one call site: on a GPU the lanes of a warp, each with its
           own box, run it together whichever they check. */
        int m = b->m;
        int span_end = record ? 0 : iv_span_last(b, P, m);
        ival T = span_end ? iv_make(P->times[m], P->times[span_end])
                          : iv_point(P->times[m]);
        ival dense[IV_N];
        const ival *X = s->X;
        int enclosed = 1;
        if (span_end || P->times[m] < s->t) {
            ++b->enclosures;
            enclosed = iv_dense(w, T, dense);
            X = dense;
        }
        if (span_end) {
            iv_span_done(b, P, span_end, enclosed && iv_span_inside(b, P, m, span_end, X, T));
        } else if (!enclosed) {
            verdict = IV_FAILED;
        } else {
            if (record) {
                for (int i = 0; i < IV_N; ++i)
                    record[m * IV_N + i] = X[i];
            } else {
                verdict = iv_box_compare(b, P, m, X);
            }
            ++b->m;
        }
    } else if (b->m < P->n_times) {
        /* a step towards the last data time, as long as the a-priori enclosure and the
           remainder's tolerance allow: the data times it passes cost iv_dense only */
        double limit = P->max_step > 0.0 ? P->max_step : INFINITY;
        double last = P->times[P->n_times - 1];
        double h = fmin(b->h_next, last - s->t);
        /* a step that would stop just short of the last time goes to it (no sliver) */
        double t1 = h * (1.0 + 1e-6) >= last - s->t ? last : s->t + h;
        /* the last halving accepts any remainder: the step is sound anyway */
        double tolerance = b->halvings < P->max_halvings ? P->tolerance : INFINITY;
        int ok = t1 > s->t ? iv_step(s, t1, b->c_box, b->c_mid, tolerance, w) : -1;
        if (ok == 1) {
            ++b->steps;
            b->halvings = 0;
            b->step_end = iv_first_at_or_after(P, b->m, s->t);
            b->h_next = fmin(iv_step_factor(P->step_rule, 1, w->excess) * h, limit);
        } else if (ok == 0 && b->halvings < P->max_halvings) {
            ++b->halvings;
            b->h_next = iv_step_factor(P->step_rule, 0, w->excess) * h;
        } else {
            verdict = IV_FAILED;
        }
        if (verdict == IV_RUNNING && b->steps >= P->max_steps)
            verdict = IV_FAILED;
    }
    if (record && verdict == IV_FAILED)
        for (int m = b->m; m < P->n_times; ++m)  /* not reached */
            for (int i = 0; i < IV_N; ++i)
                record[m * IV_N + i] = iv_entire();
    if (verdict == IV_RUNNING && b->m >= P->n_times)  /* every time passed */
        verdict = b->inside ? IV_FEASIBLE : IV_UNDECIDED;
    return verdict;
}

/* Go on with a box for at most `budget` attempted steps. Returns IV_RUNNING (budget
   used up), or the box's verdict (record: as iv_box_work). */
SBMLGPU_HD int iv_box_advance(iv_box *b, const iv_problem *P, long long budget,
                              ival *record, iv_scratch *w)
{
    int verdict = IV_RUNNING;
    while (verdict == IV_RUNNING) {
        if (!iv_box_check_due(b, P) && budget-- <= 0)
            return IV_RUNNING;
        verdict = iv_box_work(b, P, record, w);
    }
    return verdict;
}

/* The verdict of one box, start to end. */
SBMLGPU_HD int iv_check_box(iv_box *b, const double *q_lo, const double *q_hi,
                            const double *point, const iv_problem *P, ival *record,
                            iv_scratch *w)
{
    int verdict = iv_box_start(b, q_lo, q_hi, point, P);
    if (verdict == IV_RUNNING)
        verdict = iv_box_advance(b, P, P->max_steps * (long long)(P->max_halvings + 1) + 1,
                                 record, w);
    else if (record)
        for (int m = 0; m < P->n_times; ++m)
            for (int i = 0; i < IV_N; ++i)
                record[m * IV_N + i] = iv_entire();
    return verdict;
}
