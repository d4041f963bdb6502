/* The serial part of the spatial joint steps (sweep.pxi spatial_step) for lanes of
 * states (lanes.h): the poses C = C_parent B_i J_i(q_i) in frame s
 * (rnea_common.pxi root_relative_pose) and the spatial screws J = Ad_C S, from each
 * state's joint-local results, which do not depend on the parent and are computed one
 * state at a time (lanes.pxi _lane_joint_steps): sin and cos of the revolute
 * fast-path angles (sc), the joint poses B_i J_i of the other joints (T) and the
 * body-fixed subspaces of the joints without a fast path (S).  The same expressions as
 * joints.pxi joint_pose_rev, rnea_common.pxi root_relative_pose and
 * spatial_screw_1dof, and sweep.pxi spatial_pose_and_screws. */

#if TD_LANES > 1
static void TD_FN(spatial_poses)(int nb, const int* parent, const int* voff, const int* nvj,
                                 const int* fast, const double* X, const double* Bref,
                                 const T_* sc, const T_* T, const T_* S, T_* C, T_* J)
{
    T_ Tl[12];
    for (int i = 0; i < nb; i++) {
        const int o = voff[i], f = fast[i], par = parent[i];
        const double* Xo = &X[6 * o];
        const T_* Ti = &T[12 * i];
        T_* Ci = &C[12 * i];
        if (f >= TD_FAST_REV_X && f <= TD_FAST_REV_Z) {
            /* T.R = B.R Rot_k(q): only the two columns other than k mix */
            const double* B = &Bref[12 * i];
            const T_ c = sc[2 * i + 1];
            const T_ s = Xo[f - 1] < 0.0 ? -sc[2 * i] : sc[2 * i];
            for (int r = 0; r < 3; r++) {
                if (f == TD_FAST_REV_Z) {
                    Tl[3 * r + 0] = c * B[3 * r + 0] + s * B[3 * r + 1];
                    Tl[3 * r + 1] = c * B[3 * r + 1] - s * B[3 * r + 0];
                    Tl[3 * r + 2] = TD_SPLAT(B[3 * r + 2]);
                } else if (f == TD_FAST_REV_X) {
                    Tl[3 * r + 0] = TD_SPLAT(B[3 * r + 0]);
                    Tl[3 * r + 1] = c * B[3 * r + 1] + s * B[3 * r + 2];
                    Tl[3 * r + 2] = c * B[3 * r + 2] - s * B[3 * r + 1];
                } else {
                    Tl[3 * r + 0] = c * B[3 * r + 0] - s * B[3 * r + 2];
                    Tl[3 * r + 1] = TD_SPLAT(B[3 * r + 1]);
                    Tl[3 * r + 2] = c * B[3 * r + 2] + s * B[3 * r + 0];
                }
            }
            Tl[9] = TD_SPLAT(B[9]); Tl[10] = TD_SPLAT(B[10]); Tl[11] = TD_SPLAT(B[11]);
            Ti = Tl;
        }
        if (par < 0) {
            for (int n = 0; n < 9; n++)
                Ci[n] = Ti[n];
            Ci[9] = TD_SPLAT(0.0); Ci[10] = TD_SPLAT(0.0); Ci[11] = TD_SPLAT(0.0);
        } else {
            const T_* Cp = &C[12 * par];
            TD_FN(pose_mul)(Cp, &Cp[9], Ti, &Ti[9], Ci, &Ci[9]);
        }
        if (f == TD_FAST_SCREW) {
            TD_FN(twist_Ad_cV)(Ci, &Ci[9], Xo, &J[6 * o]);
        } else if (f != 0) {
            const int k = f - TD_FAST_REV_X;
            const double sg = Xo[k] > 0.0 ? 1.0 : -1.0;
            T_* Jo = &J[6 * o];
            Jo[0] = sg * Ci[k];
            Jo[1] = sg * Ci[3 + k];
            Jo[2] = sg * Ci[6 + k];
            TD_FN(cross)(&Ci[9], Jo, &Jo[3]);
        } else {
            for (int k = 0; k < nvj[i]; k++)
                TD_FN(twist_Ad)(Ci, &Ci[9], &S[6 * (o + k)], &J[6 * (o + k)]);
        }
    }
}
#endif
